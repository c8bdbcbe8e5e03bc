"""The viewer's aiohttp application: four pages (run, rollout, row, compare) and the JSON API under
``/api/`` (docs/viewer.md).

Read-only: every handler reads through :class:`~.reader.RunView`, which opens files only through
:class:`~.files.RunFiles` (no symlink followed, regular files only); nothing under the run
directory is written. Pages are static files shipped in the package (``view/static``), served
with a Content-Security-Policy that allows only this origin's scripts and styles (no inline
script runs, whatever a rollout holds).

Other web pages: a request whose ``Host`` (or ``Origin``) is not a loopback name or the address
the viewer listens on is refused with 403 (:class:`HostCheck`) — a page on another origin whose
name resolves to 127.0.0.1 (DNS rebinding) gets nothing. Idle and slow clients:
:func:`start_server` closes a connection that has not sent a whole request head within
``header_timeout`` seconds and refuses connections above ``max_connections``.

Over 450 lines as one HTTP app: a dozen short route handlers over :mod:`strands_art.view.reader`,
with the host check and the connection limits.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web

from strands_art.validation import is_int, is_real

from .files import NotRegular, Refused, RunFiles
from .payloads import rollout_payload, row_payload
from .reader import FIELD_LIMIT, RunView, clip
from .training import batches, compare, run_labels


@dataclass(frozen=True)
class HostCheck:
    """Which ``Host`` / ``Origin`` names the viewer answers (against DNS rebinding).

    Allowed: ``localhost``, any loopback IP literal, the address it listens on (``bound``), any
    IP literal when it listens on a wildcard address (0.0.0.0, ::), and the names in ``extra``
    (``strands-art view --allow-host``). A request without ``Host`` (HTTP/1.0, not a browser)
    passes; an ``Origin`` of ``null`` does not.
    """

    bound: str = "127.0.0.1"
    extra: frozenset[str] = field(default_factory=frozenset)

    def allows(self, name: str) -> bool:
        """Whether ``name`` (a host without its port, brackets stripped) is allowed."""
        name = name.lower().rstrip(".")
        if name == "localhost" or name in self.extra:
            return True
        try:
            ip = ipaddress.ip_address(name)
        except ValueError:
            return False
        bound = self.bound.strip("[]")
        return ip.is_loopback or name == bound.lower() or bound in ("0.0.0.0", "::", "")

    def problem(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with these headers is refused; None when it is not."""
        if host is not None and not self.allows(_hostname(host)):
            return f"Host {host[:100]!r} is not an address of this viewer"
        if origin is not None:
            rest = origin.partition("://")[2]
            if origin == "null" or not rest or not self.allows(_hostname(rest.partition("/")[0])):
                return f"Origin {origin[:100]!r} is not this viewer"
        return None


def _hostname(host: str) -> str:
    """``host`` of a Host header (``name``, ``name:port``, ``[v6]:port``) without its port."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


VIEW = web.AppKey("view", RunView)
VIEWS = web.AppKey("views", list)
HOSTS = web.AppKey("hosts", HostCheck)
HEADER_TIMEOUT = 10.0
"""Seconds a connection may take to send a whole request head (and may stay idle after one)."""
MAX_CONNECTIONS = 64
"""Connections served at once; more are closed as they come."""
PAGES = ("/", "/rollout", "/row", "/compare")  # one HTML shell; common.js loads the page's script
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SORT_KEYS = (
    "outer_batch", "reward", "advantage", "turns", "rows", "tokens", "wall_s", "rollout_id", "task", "stop_reason",
)  # fmt: skip
MAX_LIMIT = 1000


def static_dir() -> Path:
    """Where the page files are (inside the installed package)."""
    return Path(str(resources.files("strands_art.view") / "static"))


def make_app(
    view: RunView, others: list[RunView] | None = None, hosts: HostCheck | None = None
) -> web.Application:
    """The application over ``view`` (see the module docstring for the routes); ``others``:
    more runs, compared with it on ``/compare`` and opened with ``?run=K`` (1-based among
    them; 0 or none: ``view``); ``hosts``: the names it answers (default: loopback only,
    :class:`HostCheck`)."""
    app = web.Application(middlewares=[_headers])
    app[VIEW] = view
    app[VIEWS] = [view, *(others or [])]
    app[HOSTS] = hosts or HostCheck()
    for path in PAGES:
        app.router.add_get(path, _page)
    app.router.add_get("/static/{name}", _static)
    app.router.add_get("/api/run", _run)
    app.router.add_get("/api/rollouts", _rollouts)
    app.router.add_get("/api/groups", _groups)
    app.router.add_get("/api/metrics", _metrics)
    app.router.add_get("/api/live", _live)
    app.router.add_get("/api/rollout/{rid}", _rollout)
    app.router.add_get("/api/rollout/{rid}/row/{k}", _row)
    app.router.add_get("/api/file", _file)
    app.router.add_get("/api/batches", _batches)
    app.router.add_get("/api/compare", _compare)
    return app


async def start_server(
    view: RunView,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    others: list[RunView] | None = None,
    allow_hosts: Iterable[str] = (),
    header_timeout: float = HEADER_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
) -> web.AppRunner:
    """Serve ``view`` (and ``others``, :func:`make_app`) on ``host``:``port`` (0: a free port;
    ``runner.addresses`` says which).

    A connection that has not sent a whole request head ``header_timeout`` seconds after it
    opened (or after its last response) is closed (aiohttp's keep-alive timer, which runs from
    the connection's start); connections above ``max_connections`` are closed as they come.
    Call ``await runner.cleanup()`` to stop.

    Raises:
        OSError: the address cannot be bound.
    """
    hosts = HostCheck(host, frozenset(h.lower() for h in allow_hosts))
    runner = web.AppRunner(make_app(view, others, hosts), access_log=None, keepalive_timeout=header_timeout)
    await runner.setup()
    server = runner.server
    assert server is not None
    made = server.connection_made

    def connection_made(handler: Any, transport: asyncio.Transport) -> None:
        made(handler, transport)
        if len(server.connections) > max_connections:
            handler.force_close()  # closes the transport; the handler never reads

    server.connection_made = connection_made  # type: ignore[method-assign]
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


@web.middleware
async def _headers(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        refused = request.app[HOSTS].problem(request.headers.get("Host"), request.headers.get("Origin"))
        if refused is not None:
            raise _error(web.HTTPForbidden, refused + " (DNS rebinding?): open the viewer by its own address")
        resp = await handler(request)
    except web.HTTPException as exc:
        if not request.path.startswith("/api/"):
            raise
        resp = _json({"error": exc.reason if exc.text is None else exc.text}, status=exc.status)
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["Cache-Control"] = "no-store"
    return resp


def _json(data: Any, status: int = 200) -> web.Response:
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere: sent as strings
        text = json.dumps(_finite(data), ensure_ascii=False)
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a "\ud800" escape in a file): sent escaped
        body = json.dumps(_finite(data)).encode("ascii")
    return web.Response(body=body, status=status, content_type="application/json", charset="utf-8")


def _finite(x: Any) -> Any:
    """NaN and infinities as strings (JSON has none; a NaN reward is data to show)."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def _as_text(value: Any) -> str:
    """A string field that :func:`.reader.clip` may have cut (then its head)."""
    return value["head"] if isinstance(value, dict) and "head" in value else str(value)


def _error(status: type[web.HTTPException], text: str) -> web.HTTPException:
    return status(text=text)


async def _page(request: web.Request) -> web.FileResponse:
    return web.FileResponse(static_dir() / "page.html")


async def _static(request: web.Request) -> web.FileResponse:
    name = request.match_info["name"]
    files = {p.name for p in static_dir().iterdir() if p.is_file()}
    if name not in files:  # only the shipped files, never a path
        raise web.HTTPNotFound()
    return web.FileResponse(static_dir() / name)


def _chosen(request: web.Request) -> RunView:
    """The run of ``?run=K`` (0, the default: the first run given)."""
    views = request.app[VIEWS]
    return views[_int(request, "run", 0, 0, len(views) - 1)]


async def _fresh(request: web.Request) -> RunView:
    view = _chosen(request)
    await asyncio.to_thread(view.refresh)
    return view


async def _run(request: web.Request) -> web.Response:
    view = await _fresh(request)
    rollouts = view.rollouts()
    stored = view.mark_parts([r for r in rollouts if r["stored"]])
    return _json(
        {
            "name": view.root.name,
            "config": view.config(),
            "code": view.code(),
            "problems": view.problems,
            "rollouts": len(rollouts),
            "stored": len(stored),
            "missing_parts": [r["rollout_id"] for r in stored if r["part_missing"]],
            "has_metrics": view.files.is_file("metrics.jsonl"),
            "training": view.is_training,
            "runs": run_labels([v.root for v in request.app[VIEWS]]),
            "trained_problems": view.trained.problems,
            "decoded": view.tokenizer is not None,
            "tokenizer": getattr(view.tokenizer, "name_or_path", None)
            if view.tokenizer is not None
            else None,
        }
    )


def _int(request: web.Request, key: str, default: int, lo: int = 0, hi: int = 10**9) -> int:
    raw = request.query.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _error(web.HTTPBadRequest, f"{key} must be an integer, got {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise _error(web.HTTPBadRequest, f"{key} must be in [{lo}, {hi}], got {value}")
    return value


def _filtered(request: web.Request, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    q = request.query
    if q.get("task"):
        items = [r for r in items if str(r.get("task") or r.get("group")) == q["task"]]
    if q.get("stop"):
        items = [r for r in items if str(r.get("stop_reason")) == q["stop"]]
    if q.get("event"):
        items = [r for r in items if (r.get("events") or {}).get(q["event"])]
    if q.get("q"):
        items = [r for r in items if q["q"].lower() in _as_text(r["rollout_id"]).lower()]
    if q.get("split"):
        items = [r for r in items if r.get("split") == q["split"]]
    if q.get("batch"):
        items = [r for r in items if str(r.get("outer_batch")) == q["batch"]]
    key = q.get("sort") or ""
    if key:
        if key not in SORT_KEYS:
            raise _error(web.HTTPBadRequest, f"sort must be one of {', '.join(SORT_KEYS)}")
        present, absent = [], []
        for r in items:
            v = r.get(key)
            sortable = isinstance(v, str) or is_real(v)
            (present if sortable else absent).append(r)
        # numbers before strings (a results file may hold both under one key: no TypeError)
        present.sort(key=lambda r: (isinstance(r[key], str), r[key]), reverse=q.get("desc") == "1")
        items = present + absent
    return items


async def _rollouts(request: web.Request) -> web.Response:
    view = await _fresh(request)
    every = view.rollouts()
    items = _filtered(request, every)
    offset, limit = _int(request, "offset", 0), _int(request, "limit", 100, 1, MAX_LIMIT)
    rewards = [
        r["reward"] for r in every if isinstance(r.get("reward"), (int, float)) and math.isfinite(r["reward"])
    ]
    hist: dict[str, int] = {}
    for x in rewards:
        k = f"{round(x, 2):g}"
        hist[k] = hist.get(k, 0) + 1
    kinds = sorted({k for r in every for k in (r.get("events") or {})})
    return _json(
        {
            "total": len(items),
            "all": len(every),
            "offset": offset,
            "items": view.mark_parts(items[offset : offset + limit]),
            "tasks": sorted({str(r.get("task") or r.get("group")) for r in every}),
            "batches": sorted({r["outer_batch"] for r in every if is_int(r.get("outer_batch"))}),
            "stop_reasons": sorted({str(r.get("stop_reason")) for r in every}),
            "event_kinds": kinds,
            "reward_hist": sorted(hist.items(), key=lambda kv: float(kv[0])),
            "reward_mean": sum(rewards) / len(rewards) if rewards else None,
            "tokens": sum(r.get("tokens") or 0 for r in every),
            "sampled_tokens": sum(r.get("sampled_tokens") or 0 for r in every),
        }
    )


async def _groups(request: web.Request) -> web.Response:
    view = await _fresh(request)
    groups: dict[str, list[dict[str, Any]]] = {}
    items = _filtered(request, view.rollouts())
    if view.is_training and not request.query.get("split"):  # held-out rollouts form no GRPO group
        items = [r for r in items if r.get("split") != "eval"]
    for r in items:
        groups.setdefault(str(r["group"]), []).append(r)
    offset, limit = _int(request, "offset", 0), _int(request, "limit", 50, 1, MAX_LIMIT)
    names = list(groups)
    keys = ("rollout_id", "reward", "advantage", "stop_reason", "turns", "rows", "events", "failed", "excluded")  # fmt: skip
    return _json(
        {
            "total": len(names),
            "zero_variance": sum(1 for n in names if groups[n][0]["zero_variance"]),
            "items": [
                {
                    "group": n,
                    "zero_variance": groups[n][0]["zero_variance"],
                    "members": [{k: m.get(k) for k in keys} for m in groups[n]],
                }
                for n in names[offset : offset + limit]
            ],
        }
    )


async def _batches(request: web.Request) -> web.Response:
    """Per outer batch of a training run (:func:`.training.batches`)."""
    view = await _fresh(request)
    records = await asyncio.to_thread(view.metrics)
    return _json(clip(batches(records, view.rollouts()), 300))


async def _compare(request: web.Request) -> web.Response:
    """Every run given, side by side (:func:`.training.compare`)."""
    views = request.app[VIEWS]
    names = run_labels([v.root for v in views])
    runs = [(name, await asyncio.to_thread(v.metrics)) for name, v in zip(names, views, strict=True)]
    out = compare(runs)
    for run, view in zip(out["runs"], views, strict=True):
        # the commits that trained it, in order (code.jsonl; [] for a run of an older strands-art)
        code = await asyncio.to_thread(view.code)
        run["commits"] = list(
            dict.fromkeys(c.get("commit") if isinstance(c.get("commit"), str) else None for c in code)
        )
    return _json(clip(out, 300))


async def _metrics(request: web.Request) -> web.Response:
    view = _chosen(request)
    records = clip(await asyncio.to_thread(view.metrics), 200)
    return _json({"records": records, "unreadable_lines": view.problems.get("unreadable_metrics_lines", 0)})


async def _live(request: web.Request) -> web.Response:
    view = await _fresh(request)
    return _json(
        {
            "rollouts": len(view.order),
            "stored": len(view.lines),
            "version": list(view._sizes),
            "inflight": view.live(),
            "problems": view.problems,
        }
    )


async def _rollout(request: web.Request) -> web.Response:
    view = await _fresh(request)
    rid = request.match_info["rid"]
    if rid not in view.lines:
        raise _error(web.HTTPNotFound, f"no stored trajectory for rollout {rid[:200]!r}")
    try:
        return _json(await asyncio.to_thread(rollout_payload, view, rid))
    except (ValueError, TypeError, AttributeError) as exc:  # an unreadable line, odd JSON shapes
        raise _error(
            web.HTTPUnprocessableEntity, f"unreadable trajectory {rid[:200]!r}: {exc}"[:500]
        ) from None


async def _row(request: web.Request) -> web.Response:
    view = await _fresh(request)
    rid = request.match_info["rid"]
    try:
        k = int(request.match_info["k"])
    except ValueError:
        raise _error(web.HTTPBadRequest, "the row index must be an integer") from None
    if rid not in view.lines:
        raise _error(web.HTTPNotFound, f"no stored trajectory for rollout {rid[:200]!r}")
    try:
        return _json(await asyncio.to_thread(row_payload, view, rid, k))
    except KeyError as exc:
        raise _error(web.HTTPNotFound, str(exc.args[0])[:500]) from None
    except (ValueError, TypeError, AttributeError) as exc:  # an unreadable line, odd JSON shapes
        raise _error(
            web.HTTPUnprocessableEntity, f"unreadable trajectory {rid[:200]!r}: {exc}"[:500]
        ) from None


async def _file(request: web.Request) -> web.Response:
    """A text file of the run directory (an evaluation log), clipped. Opened through
    :class:`~.files.RunFiles`: ``..``, absolute paths and a symlink at any component are refused
    with 403, and so are regular files with more than one hard link (another name may be outside
    the run); a FIFO, a socket or a directory is 404."""
    view = request.app[VIEW]
    rel = request.query.get("path", "")
    try:
        return _json(await asyncio.to_thread(_read_head, view.files, rel))
    except Refused as exc:
        raise _error(web.HTTPForbidden, f"{rel[:200]!r}: {exc.strerror}") from None
    except NotRegular as exc:
        raise _error(
            web.HTTPNotFound, f"no file {rel[:200]!r} in the run directory ({exc.strerror})"
        ) from None
    except ValueError:  # a NUL byte, longer than PATH_MAX
        raise _error(web.HTTPBadRequest, f"not a usable path: {rel[:200]!r}") from None
    except OSError as exc:  # a name too long, no permission
        raise _error(web.HTTPBadRequest, f"cannot read {rel[:200]!r}: {exc.strerror}") from None


def _read_head(files: RunFiles, rel: str) -> dict[str, Any]:
    with files.open(rel) as f:
        st = os.fstat(f.fileno())
        if st.st_nlink > 1:  # a hard link: the same file may live outside the run directory
            raise Refused(
                0, f"has {st.st_nlink} hard links: it may be a file outside the run directory", rel[:200]
            )
        head = f.read(FIELD_LIMIT * 4)
    return {
        "path": rel,
        "size": st.st_size,
        "text": clip(head.decode("utf-8", errors="replace")),
        "cut": st.st_size > len(head),
    }
