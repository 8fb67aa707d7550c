"""The Docker backend's pull policy (SECUREBENCH_IMAGE_PULL): with `missing`, the default, an
image no candidate of the host has is pulled the first time a sandbox needs it, and whoever
listens is told while it waits; with `never` (air-gapped sites) nothing is pulled and the
sandbox is unavailable, naming the image. The registry is a real one on loopback
(tests/registry.py): the engine pulls from it as from any other."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.components import LOCAL_IMAGE
from tests.conftest import sandbox_or_skip
from tests.registry import LocalRegistry, remove_image
from verifiers.sandbox import SandboxSpec, SandboxUnavailable
from verifiers.sandbox.docker_engine import image_present, image_refused, pull_observer

pytestmark = pytest.mark.database_independent


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    sandbox_or_skip("docker")
    served = LocalRegistry(tmp_path_factory.mktemp("registry"))
    served.start()
    yield served
    served.stop()


@pytest.fixture
def pack_image(registry: LocalRegistry) -> Iterator[str]:
    """A pack's image that this engine does not have yet, served by the registry."""
    reference = registry.publish(LOCAL_IMAGE, "securebench-test/python", uuid.uuid4().hex[:12])
    yield reference
    remove_image(reference)


MISSING_DEFAULT = "securebench-missing/none:0"


@pytest.fixture
def docker(monkeypatch: pytest.MonkeyPatch):
    # No image stands in: a default image that is not on the host (one set explicitly turns
    # off the locally built image's stand-in, docker_engine.fallback_image).
    monkeypatch.setenv("SECUREBENCH_DEFAULT_IMAGE", MISSING_DEFAULT)
    monkeypatch.delenv("SECUREBENCH_IMAGE_ALIASES", raising=False)
    return sandbox_or_skip("docker")


def spec(image: str) -> SandboxSpec:
    return SandboxSpec(command=["python3", "-c", "print(6 * 7)"], image=image)


def test_a_missing_image_is_pulled_on_first_use_and_the_wait_is_told(
    docker, pack_image: str, registry: LocalRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SECUREBENCH_IMAGE_PULL", raising=False)  # the default: missing
    assert not image_present(docker.client, pack_image)
    told: list[tuple[str, bool]] = []
    token = pull_observer.set(lambda image, waiting: told.append((image, waiting)))
    try:
        result = docker.run(spec(pack_image))
    finally:
        pull_observer.reset(token)

    assert result.exit_code == 0 and result.stdout.strip() == b"42"
    assert result.image == pack_image
    assert told == [(pack_image, True), (pack_image, False)]
    assert image_present(docker.client, pack_image)
    assert any("/manifests/" in request for request in registry.requests)
    # Present now: the next sandbox starts without asking the registry again.
    before = len(registry.requests)
    assert docker.run(spec(pack_image)).exit_code == 0
    assert len(registry.requests) == before


def test_with_the_never_policy_nothing_is_pulled(
    docker, pack_image: str, registry: LocalRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECUREBENCH_IMAGE_PULL", "never")
    before = len(registry.requests)

    with pytest.raises(SandboxUnavailable, match="pull policy is `never`") as refused:
        docker.run(spec(pack_image))

    assert pack_image in str(refused.value)
    assert len(registry.requests) == before, "the registry was asked"
    assert not image_present(docker.client, pack_image)


def test_an_image_the_registry_does_not_have_is_unavailable_naming_it(
    docker, registry: LocalRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SECUREBENCH_IMAGE_PULL", raising=False)
    unknown = f"{registry.host}/securebench-test/nothing:{uuid.uuid4().hex[:8]}"

    with pytest.raises(SandboxUnavailable, match="could not be pulled") as refused:
        docker.run(spec(unknown))

    assert unknown in str(refused.value)


def test_an_unknown_pull_policy_is_refused(docker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECUREBENCH_IMAGE_PULL", "sometimes")
    with pytest.raises(SandboxUnavailable, match="SECUREBENCH_IMAGE_PULL must be one of"):
        docker.run(spec("securebench-test/absent:1"))


def test_an_image_that_cannot_be_had_runs_in_the_locally_built_image_and_says_so(
    docker, registry: LocalRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine without a registry and with `make sandbox-image`'s image: a pack's image it
    lacks and cannot pull runs in that image, and the result's notes say which."""
    if not image_present(docker.client, LOCAL_IMAGE):
        pytest.skip(f"{LOCAL_IMAGE} is not on this host (make sandbox-image builds it)")
    monkeypatch.delenv("SECUREBENCH_DEFAULT_IMAGE", raising=False)
    monkeypatch.delenv("SECUREBENCH_IMAGE_PULL", raising=False)
    unknown = f"{registry.host}/securebench-test/nothing:{uuid.uuid4().hex[:8]}"

    result = docker.run(spec(unknown))

    assert result.exit_code == 0 and result.stdout.strip() == b"42"
    assert result.image == LOCAL_IMAGE
    assert any(unknown in note and LOCAL_IMAGE in note for note in result.notes)
    # The `never` policy (an air-gapped site) is served the same way, without asking.
    monkeypatch.setenv("SECUREBENCH_IMAGE_PULL", "never")
    before = len(registry.requests)
    assert docker.run(spec(unknown)).image == LOCAL_IMAGE
    assert len(registry.requests) == before


def test_an_image_that_cannot_be_had_and_has_no_stand_in_is_told_by_name(
    docker, registry: LocalRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SECUREBENCH_IMAGE_PULL", raising=False)
    unknown = f"{registry.host}/securebench-test/nothing:{uuid.uuid4().hex[:8]}"
    refused: list[str] = []
    token = image_refused.set(refused.append)
    try:
        with pytest.raises(SandboxUnavailable):
            docker.run(spec(unknown))
    finally:
        image_refused.reset(token)

    assert refused == [unknown]
