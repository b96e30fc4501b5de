"""The one-command demo: a whole replay through the real pipeline, with a summary and plots."""
