"""The configuration reference: ``docs/configuration.md`` rendered from the ``Settings``
dataclasses themselves, so the document cannot drift from the code.

What it documents and in what words (:mod:`.sections`: one section per concern and per service;
:mod:`.texts`: the programs, the variables read outside the settings and the page's fixed
text), how that becomes Markdown (:mod:`.render`), and the command that writes or checks the
file (:mod:`.cli`, ``python -m stacktools.config_reference``).
"""
