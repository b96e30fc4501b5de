"""Kafka users and ACLs from the access table (stacktools.stack.access), applied by the admin.

Everything here is idempotent: upserting a SCRAM user sets its password again, creating an
ACL that exists changes nothing. So the launcher applies it on every start (a password
changed in ``credentials.env`` takes effect) and topic provisioning on every call.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from stacktools.stack.access import PREFIX_GRANTS, RETIRED_KAFKA_USERS, TOPIC_RIGHTS, USERS
from stacktools.stack.settings import Settings

#: SCRAM iterations: Kafka's minimum is 4096; more only slows every client's login.
SCRAM_ITERATIONS = 8192

_OPERATIONS = {
    "read": (AclOperation.READ, AclOperation.DESCRIBE),
    "write": (AclOperation.WRITE, AclOperation.DESCRIBE),
}
_PREFIX_OPERATIONS = {
    "group": (ResourceType.GROUP, (AclOperation.READ, AclOperation.DESCRIBE)),
    "transactional_id": (
        ResourceType.TRANSACTIONAL_ID,
        (AclOperation.WRITE, AclOperation.DESCRIBE),
    ),
}
#: Users created here; the admin is created when the storage is formatted and the controller
#: user is static (PLAIN, controller listener only).
SERVICE_USERS = tuple(user for user in USERS["kafka"] if user not in ("admin", "controller"))


def _allow(
    resource: ResourceType,
    name: str,
    pattern: ResourcePatternType,
    user: str,
    operation: AclOperation,
) -> AclBinding:
    return AclBinding(
        resource, name, pattern, f"User:{user}", "*", operation, AclPermissionType.ALLOW
    )


#: Past the request's own timeout, so that librdkafka reports its timeout (as a KafkaException)
#: before this process stops waiting on the answer.
ANSWER_MARGIN_S = 5.0


def answers(futures: Iterable[Future], timeout_s: float, what: str) -> list[Any]:
    """The results of an admin request's ``futures``; a request that got no answer within its
    ``timeout_s`` raises a KafkaException ``_TIMED_OUT`` naming ``what``, as librdkafka's own
    timeout does, so that callers treat both alike (streamkit.kafka_io.transient)."""
    results: list[Any] = []
    for future in futures:
        try:
            results.append(future.result(timeout=timeout_s + ANSWER_MARGIN_S))
        except TimeoutError:
            raise KafkaException(
                KafkaError(KafkaError._TIMED_OUT, f"no answer within {timeout_s:.0f} s to {what}")
            ) from None
    return results


def _create(admin: AdminClient, bindings: list[AclBinding], timeout_s: float) -> None:
    if bindings:
        answers(
            admin.create_acls(bindings, request_timeout=timeout_s).values(),
            timeout_s,
            "creating ACLs",
        )


def upsert_users(admin: AdminClient, settings: Settings, timeout_s: float = 30.0) -> None:
    """Create each service's SCRAM user with its password from the credentials."""
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(
            user,
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS),
            settings.credential("kafka", user).reveal().encode(),
        )
        for user in SERVICE_USERS
    ]
    answers(
        admin.alter_user_scram_credentials(upserts, request_timeout=timeout_s).values(),
        timeout_s,
        "setting the users' passwords",
    )


def retire_users(
    admin: AdminClient, users: Iterable[str] = RETIRED_KAFKA_USERS, timeout_s: float = 30.0
) -> list[str]:
    """Delete the SCRAM credentials and every ACL of users no release has any more (a run
    directory from before keeps them in its cluster metadata, able to log in with their old
    rights); the ones that existed."""
    wanted = set(users)
    described = admin.describe_user_scram_credentials(request_timeout=timeout_s)
    assert not isinstance(described, dict), "every user's credentials come as one future"
    (described_users,) = answers([described], timeout_s, "describing the users")
    present = sorted(wanted & set(described_users))
    if present:
        deletions: list[UserScramCredentialAlteration] = [
            UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512) for user in present
        ]
        answers(
            admin.alter_user_scram_credentials(deletions, request_timeout=timeout_s).values(),
            timeout_s,
            "deleting retired users",
        )
    filters = [
        AclBindingFilter(  # None: any resource name, any host (the stubs say str only)
            ResourceType.ANY,
            None,  # type: ignore[arg-type]
            ResourcePatternType.ANY,
            f"User:{user}",
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        for user in sorted(wanted)
    ]
    answers(
        admin.delete_acls(filters, request_timeout=timeout_s).values(),
        timeout_s,
        "deleting retired users' ACLs",
    )
    return present


def grant_prefixes(admin: AdminClient, timeout_s: float = 30.0) -> None:
    """Each service's own consumer groups and transactional ids."""
    bindings = [
        _allow(
            _PREFIX_OPERATIONS[grant.resource][0],
            grant.prefix,
            ResourcePatternType.PREFIXED,
            grant.user,
            operation,
        )
        for grant in PREFIX_GRANTS
        for operation in _PREFIX_OPERATIONS[grant.resource][1]
    ]
    _create(admin, bindings, timeout_s)


def grant_topics(
    admin: AdminClient, topics: Iterable[tuple[str, str]], timeout_s: float = 30.0
) -> None:
    """The rights of each (topic name, role): the same for a test's private topic as for the
    declared one of that role."""
    wanted = {
        (name, user, operation)
        for name, role in topics
        for user, rights in TOPIC_RIGHTS.get(role, {}).items()
        for right in rights
        for operation in _OPERATIONS[right]
    }
    _create(
        admin,
        [
            _allow(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, user, operation)
            for name, user, operation in sorted(wanted, key=str)
        ],
        timeout_s,
    )
