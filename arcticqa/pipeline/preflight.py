"""What a build checks before it opens (or creates) its store: its inputs, keys and endpoints.

A build that cannot run should say so at once, in one line, and leave nothing behind: a keyword
file that is not there, a corpus path that is wrong, an API key that is not set, a model endpoint
or the Semantic Scholar API that does not answer (no network, a wrong ``base_url``). Without these
checks such a build created ``arcticqa.db`` and then retried for minutes (24 retry lines in five
minutes for ``source = "s2"`` off the network).

The checks are what ``arcticqa doctor`` checks, for what this build will use: every role whose
model config is served over HTTP, and Semantic Scholar when the source is ``s2``. An endpoint
passes when it answers HTTP at all (a 404 on ``/models`` is an answer); only a transport failure
(no route, refused, DNS, timeout) or a refused key (401/403 from a model endpoint) stops the build.
Each endpoint is asked once, in parallel, within ``timeout_s``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import httpx

from arcticqa.config import Settings
from arcticqa.errors import EndpointUnreachable, InputError
from arcticqa.stages.discover import load_queries, parse_source

__all__ = ["Endpoint", "OPENAI_URL", "S2_URL", "model_endpoints", "probe", "check_endpoints",
           "check_build_inputs", "preflight_build", "s2_endpoint"]

#: where an ``openai`` model config without ``base_url`` is served
OPENAI_URL = "https://api.openai.com/v1"
#: the Semantic Scholar API when ``[discovery] api_url`` is unset (the client library's default)
S2_URL = "https://api.semanticscholar.org"


@dataclass(frozen=True)
class Endpoint:
    """One HTTP service a command will call: what it is for (in messages), the URL to ask and the
    environment variable of its key (None: no key)."""

    what: str
    url: str
    key_env: str | None = None
    #: whether a 401/403 answer means the key is refused (a model endpoint) or is only an answer
    auth_matters: bool = True


def model_endpoints(settings: Settings, roles: list[str] | None = None) -> list[Endpoint]:
    """One endpoint per distinct ``base_url`` among the model configs of ``roles`` (default: every
    role) that are served over HTTP, asked at ``/models`` as ``doctor`` does."""
    by_url: dict[str, tuple[list[str], str | None]] = {}
    for role in roles if roles is not None else list(settings.roles):
        cfg = settings.models.get(settings.roles[role])
        if cfg is None or cfg.provider != "openai":
            continue
        base = (cfg.base_url or OPENAI_URL).rstrip("/")
        names, _ = by_url.setdefault(base, ([], cfg.api_key_env))
        if settings.roles[role] not in names:
            names.append(settings.roles[role])
    return [Endpoint(f"model endpoint {base} (model config {', '.join(repr(n) for n in names)})",
                     f"{base}/models", key_env) for base, (names, key_env) in by_url.items()]


async def probe(client: httpx.AsyncClient, endpoint: Endpoint) -> str | None:
    """Why ``endpoint`` cannot be used, or None when it answers."""
    key = os.environ.get(endpoint.key_env or "", "") if endpoint.key_env else ""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = await client.get(endpoint.url, headers=headers)
    except httpx.TimeoutException:
        return f"{endpoint.what} did not answer within {client.timeout.connect:g} s"
    except httpx.HTTPError as exc:
        reason = str(exc).strip() or type(exc).__name__
        return f"{endpoint.what} is unreachable ({type(exc).__name__}: {reason})"
    if endpoint.auth_matters and response.status_code in (401, 403):
        named = f" (${endpoint.key_env})" if endpoint.key_env else ""
        return f"{endpoint.what} refused the API key{named}: HTTP {response.status_code}"
    return None


def check_endpoints(endpoints: list[Endpoint], *, timeout_s: float = 10.0, hint: str = "") -> None:
    """Ask every endpoint at once; raise :class:`EndpointUnreachable` naming the first that fails
    (and how many others did)."""
    if not endpoints:
        return

    async def ask_all() -> list[str | None]:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), follow_redirects=True) as client:
            return await asyncio.gather(*(probe(client, e) for e in endpoints))

    problems = [p for p in asyncio.run(ask_all()) if p is not None]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise EndpointUnreachable(f"{problems[0]}{more}; nothing was started{hint}")


def check_build_inputs(settings: Settings) -> None:
    """The build's own files and keys: the source, the keyword file (``source = "s2"``) and the key
    of every role served over HTTP. Raises the error the build would meet later."""
    source = settings.build.source.strip()
    if source == "s2":
        load_queries(settings.build.keywords_file)
    else:
        spec = parse_source(source)
        if spec.path is not None and not spec.path.exists():
            raise InputError(f"source {source!r}: not found", path=str(spec.path))
    for role in settings.roles:
        cfg = settings.models[settings.roles[role]]
        if cfg.provider == "openai":
            cfg.api_key()  # a ConfigError naming the variable when it is not set


def preflight_build(settings: Settings, *, timeout_s: float = 10.0) -> None:
    """Everything a build can check before it starts: its inputs and keys, then every endpoint it
    will call (each model endpoint; Semantic Scholar for ``source = "s2"``)."""
    check_build_inputs(settings)
    endpoints = model_endpoints(settings)
    if settings.build.source.strip() == "s2":
        endpoints.append(s2_endpoint(settings))
    check_endpoints(endpoints, timeout_s=timeout_s, hint=" (`arcticqa doctor` checks every endpoint)")


def s2_endpoint(settings: Settings) -> Endpoint:
    """The Semantic Scholar API of ``[discovery]`` (any answer counts: its key is optional)."""
    url = f"{(settings.discovery.api_url or S2_URL).rstrip('/')}/graph/v1"
    return Endpoint(f"the Semantic Scholar API {url}", url, settings.discovery.api_key_env, auth_matters=False)
