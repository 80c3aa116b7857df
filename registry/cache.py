"""Whole-page response cache for anonymous visitors, invalidated by a registry generation number.

Rendering a public page is 20–120 times the work of a trivial view (templates, SVG charts, DRF
serialisation; docs/performance.md), so a visitor without a session gets the stored bytes of the
same URL instead. Nothing is invalidated key by key: every stored page carries the registry's
*generation*, one integer in the Django cache that every change visible on a public page bumps.
One mechanism bumps it: an explicit `generation_bump()` in each state-changing service and in the
admin's save and delete of the records it lets staff edit (`registry.admin.AuditedAdmin`), no
model signals (most services write with `QuerySet.update()`, which sends none). A write made
outside those (a shell `update()`, raw SQL) calls `generation_bump()` itself. A bump makes every
stored page stale at once; each is replaced on its URL's next request, or expires by
`PAGE_CACHE_SECONDS`.

What is stored, after Django's own `UpdateCacheMiddleware` rules: only GET responses with status
200 (or a redirect where a view asks for it), not streamed, that set no cookie, did not use the
CSRF token, added no message, changed no session, are not `private`/`no-cache`/`no-store` and
vary on nothing but `Cookie` and `Accept` (the key holds the negotiated format). Served: GET and HEAD from a
visitor without a session or messages cookie who is not authenticated. The cache sits inside
the middleware, so security headers, CSP, request ids and the API throttle run on every hit.

Everyone else (signed in, or with a session or messages cookie) gets the same stored page with its
*personal regions* filled in for them: the parts of a page that depend on who asks are marked in
the templates with `{% personal "NAME" ARG %}` (the header's account links, the messages, a run
page's own submissions and moderator controls; `PERSONAL_REGIONS`). The tag renders the region
for the request at hand between two HTML comments; for a signed-in request the stored anonymous
page is read (or rendered as an anonymous request and stored, on a miss) and each marked region
is rendered again for this visitor, so only the header, their own submissions and their controls
are rendered per request, from the database, never from the cache: a user's own write shows on
the next request. (One fact comes from the cache: that a user has filed nothing at all, which
skips the query for their submissions; every filing service replaces it before its commit,
`attestations.selectors.FILINGS_KEY`.) The read API's bodies do not depend on who asks (no serializer reads the user),
so a signed-in API request is served and stored like an anonymous one.
"""

import copy
import functools
import hashlib
import re
import time
from collections import OrderedDict
from functools import wraps
from importlib import import_module

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages import get_messages
from django.core.cache import cache
from django.db import transaction
from django.http import HttpResponse
from django.middleware.gzip import GZipMiddleware, re_accepts_gzip
from django.template.loader import get_template
from django.utils import timezone
from django.utils.cache import cc_delim_re, get_conditional_response
from django.utils.http import parse_http_date_safe
from django.utils.module_loading import import_string
from django.utils.safestring import SafeData

from kernelindex.throttling import counter_incr_reading

GENERATION_KEY = "kernelindex:registry-generation"
PAGE_PREFIX = "kernelindex:page"
HIT_HEADER = "X-Page-Cache"
SHARED_HEADER = "X-Page-Shared"  # a personalised page: was its shared part stored (hit) or not
# A response varying on anything else (a language, an encoding) would need it in the key.
VARY_UNDERSTOOD = {"cookie", "accept"}
MESSAGES_COOKIE = "messages"  # django.contrib.messages' CookieStorage.cookie_name


# --- the generation ------------------------------------------------------------------------------


def generation() -> int:
    """The current generation. A missing key (a cleared or evicted cache) starts from the clock,
    never from a fixed number, so a generation is never used twice and no page stored under an
    earlier one can come back."""
    value = cache.get(GENERATION_KEY)
    if value is None:
        cache.add(GENERATION_KEY, time.time_ns(), timeout=None)
        value = cache.get(GENERATION_KEY)
    if type(value) is not int:
        # Not one of ours (a value whose signature failed reads as None; kernelindex.redis_cache):
        # replaced by a new generation, so that nothing stored before it comes back.
        value = time.time_ns()
        cache.set(GENERATION_KEY, value, timeout=None)
    return value


def _increment() -> None:
    try:
        cache.incr(GENERATION_KEY)
    except ValueError:  # missing: any new value makes every stored page unreachable
        cache.add(GENERATION_KEY, time.time_ns(), timeout=None)
    except Exception as exc:  # Redis refuses INCR on a value that is not an integer
        if type(exc).__name__ != "ResponseError":
            raise
        cache.set(GENERATION_KEY, time.time_ns(), timeout=None)


def _pending(connection) -> bool:
    return any(callback is _increment for _, callback, _ in connection.run_on_commit)


def generation_bump(*, using: str | None = None) -> None:
    """Call after any change a public page shows. Bumps at once and once more after the commit.

    After commit, because a page rendered by another process between the write and the commit
    shows the old state: the second bump makes it unreachable. At once as well, so that a reader
    on this same connection before the commit (a test's client inside the test's transaction, a
    command that renders after writing) never gets a page stored before the write. One
    after-commit callback per transaction, however many rows were saved."""
    connection = transaction.get_connection(using)
    _increment()
    if connection.in_atomic_block and not _pending(connection):
        transaction.on_commit(_increment, using=using)


# --- which requests and responses ----------------------------------------------------------------


def _timeout() -> int:
    return settings.PAGE_CACHE_SECONDS


def _cache_on(request) -> bool:
    return _timeout() > 0 and request.method in ("GET", "HEAD")


def request_cacheable(request) -> bool:
    """An anonymous GET or HEAD with nothing of its own to show: no session (so no login, no
    pending form state) and no flash messages waiting."""
    if not _cache_on(request):
        return False
    if settings.SESSION_COOKIE_NAME in request.COOKIES or MESSAGES_COOKIE in request.COOKIES:
        return False
    user = getattr(request, "user", None)
    return not (user is not None and user.is_authenticated)


def response_storable(request, response, statuses=(200,)) -> bool:
    if request.method != "GET" or response.status_code not in statuses or response.streaming:
        return False
    if response.cookies or request.META.get("CSRF_COOKIE_NEEDS_UPDATE"):
        return False  # the page carries something of this visitor's (a cookie, a CSRF token)
    messages = getattr(request, "_messages", None)
    if messages is not None and getattr(messages, "added_new", False):
        return False
    session = getattr(request, "session", None)
    if session is not None and session.modified:
        return False  # SessionMiddleware will send this visitor a session cookie
    cache_control = response.get("Cache-Control", "").lower()
    if any(word in cache_control for word in ("private", "no-cache", "no-store")):
        return False
    vary = {v.strip().lower() for v in cc_delim_re.split(response.get("Vary", "")) if v.strip()}
    return vary <= VARY_UNDERSTOOD


class _LocalPages:
    """This process's own copies of the entries it read or stored last, least recently used out
    first, up to `PAGE_CACHE_LOCAL_MB`, each for no longer than the shared entry's
    `PAGE_CACHE_SECONDS`. A copy is served only when its generation is the one the shared cache
    holds now, so it is exactly as fresh as the shared entry: a hit on it reads one integer from
    Redis instead of the whole page (for a 419 kB kernel page that was the transfer, a signature
    check over every byte and the unpickling, on every request)."""

    def __init__(self):
        self._entries: OrderedDict[str, tuple[float, dict]] = OrderedDict()
        self._bytes = 0

    def get(self, key: str) -> dict | None:
        found = self._entries.get(key)
        if found is None:
            return None
        if found[0] < time.monotonic():
            self.discard(key)
            return None
        self._entries.move_to_end(key)
        return found[1]

    def put(self, key: str, entry: dict) -> None:
        limit = settings.PAGE_CACHE_LOCAL_MB * 2**20
        self.discard(key)
        size = len(entry["content"])
        if size > limit:
            return
        self._entries[key] = (time.monotonic() + _timeout(), entry)
        self._bytes += size
        while self._bytes > limit:
            _, (_, oldest) = self._entries.popitem(last=False)
            self._bytes -= len(oldest["content"])

    def discard(self, key: str) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self._bytes -= len(found[1]["content"])

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0


local_pages = _LocalPages()


class PageSlot:
    """Where one URL's response is stored, and the generation this request saw.

    The key holds no generation: the entry carries the generation it was rendered under, and
    the generation and the entry are read together in one round trip (`get_many`, one MGET on
    Redis; a hit costs the floor one round trip, not two). An entry from an earlier generation
    is a miss and is overwritten, so a URL holds one entry, not one per registry change.

    The key: today's date (the run page prints an access date for citations), the absolute URL
    (host and scheme: API pagination links are absolute) with its query string, and the
    negotiated format."""

    def __init__(self, request, *, variant: str, versioned: bool = True, gzip: bool = False):
        uri = request.build_absolute_uri()
        self.gzip = gzip
        if gzip:
            variant += ":gzip"
        digest = hashlib.sha256(f"{variant}\n{uri}".encode()).hexdigest()
        self.versioned = versioned
        if versioned:
            self.key = f"{PAGE_PREFIX}:{timezone.now().date().isoformat()}:{digest}"
        else:
            self.key = f"{PAGE_PREFIX}:immutable:{digest}"
        self.generation = None
        self.looked_up, self.entry, self.count, self.also = False, None, None, {}

    def lookup(self, counter: tuple[str, int] | None = None, also: list[str] = ()) -> dict | None:
        """The stored entry when it is of the current generation (read before rendering, so a
        page rendered while a write commits is stored under the generation it saw): this
        process's copy when it has one of that generation, else the shared one. With a
        throttle's `counter` (key, expiry), the request is counted in the same round trip
        (`self.count`); the values of the keys `also` are read in it too (`self.also`)."""
        local = local_pages.get(self.key)
        self.looked_up = True
        also = list(also)
        if not self.versioned:
            if local is not None:
                self._read(also, counter)
                self.entry = local
            else:
                self.entry = self._keep(self._read([self.key, *also], counter).get(self.key))
            return self.entry
        keys = [GENERATION_KEY] if local is not None else [GENERATION_KEY, self.key]
        found = self._read(keys + also, counter)
        self.also = {key: found[key] for key in also if key in found}
        self.generation = found.get(GENERATION_KEY)
        if local is not None:
            found = {self.key: local} if local.get("generation") == self.generation else {}
        if type(self.generation) is not int:
            self.generation = generation()
        entry = found.get(self.key)
        if entry is None and local is not None:
            entry = cache.get(self.key)  # stale here; another process may have stored it anew
        if not isinstance(entry, dict) or entry.get("generation") != self.generation:
            self.entry = None
        else:
            self.entry = self._keep(entry)
        return self.entry

    def _read(self, keys: list[str], counter) -> dict:
        if counter is not None:
            self.count, found = counter_incr_reading(counter[0], timeout=counter[1], keys=keys)
            return found
        if len(keys) == 1:
            value = cache.get(keys[0])
            return {} if value is None else {keys[0]: value}
        return cache.get_many(keys) if keys else {}

    def _keep(self, entry):
        if isinstance(entry, dict) and entry is not local_pages.get(self.key):
            local_pages.put(self.key, entry)
        return entry

    def store(self, request, rendered, statuses=(200,)) -> dict | None:
        """Store a rendered response if it may be; returns the entry stored, or None."""
        if not response_storable(request, rendered, statuses):
            return None
        entry = {
            "generation": self.generation,
            "status": rendered.status_code,
            "content": rendered.content,
            "headers": list(rendered.items()),
        }
        if self.gzip:
            entry = _gzipped(request, entry)
        cache.set(self.key, entry, _timeout())
        local_pages.put(self.key, entry)
        return entry

    def store_when_rendered(self, request, response, statuses=(200,)) -> None:
        """Store the response once its body exists: now for a rendered `HttpResponse`, after
        rendering for a `TemplateResponse` or a DRF `Response`."""

        def store(rendered):
            self.store(request, rendered, statuses)
            return None

        if getattr(response, "is_rendered", True):
            store(response)
        else:
            response.add_post_render_callback(store)


def accepts_gzip(request) -> bool:
    return bool(re_accepts_gzip.search(request.META.get("HTTP_ACCEPT_ENCODING", "")))


def _gzipped(request, entry: dict) -> dict:
    """An HTML page as the site's gzip middleware sends it (kernelindex.middleware), compressed
    once when stored instead of on every hit (about 10 ms for the 419 kB kernel page). The
    middleware's random padding against BREACH is then fixed per stored copy; a stored page holds
    no secret to guess (no CSRF token, nothing of a visitor's: `response_storable`)."""
    response = _response(entry, entry["content"])
    if not response.get("Content-Type", "").startswith("text/html"):
        return entry
    response = GZipMiddleware(lambda request: response).process_response(request, response)
    return {**entry, "content": response.content, "headers": list(response.items())}


def _response(entry: dict, content: bytes, *, skip=()) -> HttpResponse:
    response = HttpResponse(content, status=entry["status"])
    for name, value in entry["headers"]:
        if name.lower() not in skip:
            response[name] = value
    return response


def replay(request, entry: dict) -> HttpResponse:
    """The stored response, or a 304 when the client's ETag / Last-Modified still match it."""
    response = _response(entry, entry["content"])
    response[HIT_HEADER] = "hit"
    etag, modified = response.get("ETag"), response.get("Last-Modified")
    if etag or modified:
        last_modified = parse_http_date_safe(modified) if modified else None
        not_modified = get_conditional_response(
            request, etag=etag, last_modified=last_modified, response=response
        )
        if not_modified is not None:
            return not_modified
    return response


def _served(slot: PageSlot, request, render, statuses=(200,)):
    entry = slot.entry if slot.looked_up else slot.lookup()
    if entry is not None:
        return replay(request, entry)
    response = render()
    response[HIT_HEADER] = "miss"
    slot.store_when_rendered(request, response, statuses)
    return response


# --- everyone else: the stored page with its personal regions rendered for them ---------------

# The regions of a page that depend on who asks: each a template and a function of the request
# and `arg` (one integer or nothing) giving what the template shows, as plain values.
PERSONAL_REGIONS = {
    "nav": ("personal/nav.html", "registry.cache.nav_shown"),
    "messages": ("personal/messages.html", "registry.cache.messages_shown"),
    "run": ("attestations/run_personal.html", "attestations.selectors.run_personal_shown"),
}
_PERSONAL_REGION = re.compile(rb"<!--personal:([a-z]+):([0-9]*)-->.*?<!--/personal-->", re.DOTALL)
# A personalised page's own validators would be the stored page's, which it is not.
_NOT_PERSONALISED = {"etag", "last-modified", "content-length", HIT_HEADER.lower()}


def nav_shown(request, arg) -> dict:
    user = request.user
    return {"signed_in": True, "username": user.get_username()} if user.is_authenticated else {}


def messages_shown(request, arg) -> dict:
    """The visitor's messages as text, read (and so marked shown) only when there are some."""
    storage = get_messages(request)
    return {"messages": tuple(str(message) for message in storage) if storage else ()}


def _frozen(value):
    """A hashable key for what a region shows. Marked-safe text is told apart from plain text of
    the same characters (equal as strings, rendered differently: one escaped, one not)."""
    if isinstance(value, SafeData):
        return (SafeData, str(value))
    if isinstance(value, dict):
        return tuple(sorted((key, _frozen(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return tuple(map(_frozen, value))
    return value


class _RenderedRegions:
    """This process's rendered personal regions, by region and what it shows. Most signed-in
    requests show what an earlier one showed (the same visitor's account links, no messages,
    the same moderation counts): the template is rendered once for each, not on every request
    (about a quarter of a moderator's run page). An entry is used only while its template is the
    one the loader returns (a reloaded template in development renders again); bounded by
    `LIMIT` entries, emptied when full."""

    LIMIT = 4096

    def __init__(self):
        self._html: dict = {}

    def html(self, name: str, shown: dict) -> str:
        path, _ = PERSONAL_REGIONS[name]
        loaded = get_template(path)
        template = loaded.template  # the compiled template (`loaded` is a new wrapper each time)
        key = (name, _frozen(shown))
        found = self._html.get(key)
        if found is not None and found[0] is template:
            return found[1]
        html = loaded.render(shown)
        if len(self._html) >= self.LIMIT:
            self._html.clear()
        self._html[key] = (template, html)
        return html

    def clear(self) -> None:
        self._html.clear()


rendered_regions = _RenderedRegions()


# Functions of a signed-in request giving the cache keys its personal regions read (the filings
# marker): read in the round trip that looks the page up and kept as `request.personal_cache`, a
# dict of the values found (a key read and not found is absent), instead of a round trip each.
PERSONAL_CACHE_KEYS = ["attestations.selectors.personal_cache_keys"]


@functools.cache
def _personal_key_functions() -> list:
    return [import_string(path) for path in PERSONAL_CACHE_KEYS]


@functools.cache
def _shown_function(name: str):
    return import_string(PERSONAL_REGIONS[name][1])


def _region_html(request, name: str, arg) -> str:
    shown = _shown_function(name)(request, arg)
    return _marked(name, arg, rendered_regions.html(name, {"arg": arg, **shown}))


def _marked(name: str, arg, html: str) -> str:
    return f"<!--personal:{name}:{arg}-->{html}<!--/personal-->"


def personal_region(request, name: str, arg="") -> str:
    """One personal region as this request's visitor sees it, between the markers that let a
    stored copy of the page be personalised for someone else."""
    return _region_html(request, name, arg)


def personalise(request, content: bytes) -> bytes:
    """The stored page with every personal region rendered again for this request."""
    return _PERSONAL_REGION.sub(
        lambda match: _region_html(request, match[1].decode(), match[2].decode()).encode(), content
    )


def _as_anonymous(request):
    """The same request from a visitor without a session: what the page cache stores. The
    visitor's own session, messages and cookies stay with the original request."""
    anonymous = copy.copy(request)
    anonymous.user = AnonymousUser()
    anonymous.META = request.META.copy()  # the CSRF middleware marks token use here
    anonymous.COOKIES = {
        name: value
        for name, value in request.COOKIES.items()
        if name not in (settings.SESSION_COOKIE_NAME, MESSAGES_COOKIE)
    }
    anonymous.session = import_module(settings.SESSION_ENGINE).SessionStore()
    anonymous.__dict__.pop("_messages", None)
    return anonymous


def _served_personal(slot: PageSlot, request, render, statuses=(200,)):
    """The stored page (rendered for an anonymous visitor and stored on a miss), personalised.
    A page that may not be stored for everyone (it used the CSRF token, set a cookie) is
    rendered for this visitor instead."""
    keys = [key for function in _personal_key_functions() for key in function(request)]
    entry, state = slot.lookup(also=keys), "hit"
    request.personal_cache = slot.also  # what the regions read from the cache, read with the page
    if entry is None:
        anonymous = _as_anonymous(request)
        response = render(anonymous)
        if not getattr(response, "is_rendered", True):
            response.render()
        entry, state = slot.store(anonymous, response, statuses), "miss"
        if entry is None:
            return render(request)
    response = _response(entry, personalise(request, entry["content"]), skip=_NOT_PERSONALISED)
    response[SHARED_HEADER] = state
    return response


def cached_page(view=None, *, statuses=(200,)):
    """Serve a site view's stored response to anonymous visitors, and personalised to everyone
    else (see the module docstring). `statuses=(200, 302)` for a view whose redirect depends on
    the registry (compare-best)."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not _cache_on(request):
                return view(request, *args, **kwargs)
            if not request_cacheable(request):
                # The stored page as it is, personalised here and compressed by the middleware.
                slot = PageSlot(request, variant="html")
                return _served_personal(slot, request, lambda r: view(r, *args, **kwargs), statuses)
            slot = PageSlot(request, variant="html", gzip=accepts_gzip(request))
            return _served(slot, request, lambda: view(request, *args, **kwargs), statuses)

        return wrapper

    return decorate(view) if view is not None else decorate


class CachedReadMixin:
    """For DRF read viewsets: after `initial()` (authentication, permissions, the throttle that
    must count every request, content negotiation) the handler of a GET/HEAD is wrapped to
    answer from the cache (looked up in the throttle's round trip: `check_throttles`), for anonymous and signed-in callers alike: what these endpoints
    return does not depend on who asks. The key holds the negotiated media type. The browsable
    API is never stored (it is a form page with the visitor's CSRF token and their name)."""

    page_cache_versioned = True
    _page_slot = None

    def initial(self, request, *args, **kwargs):
        self._page_slot = None
        super().initial(request, *args, **kwargs)  # check_throttles below makes the slot
        slot = self._page_slot
        if slot is None:
            return
        method = request.method.lower()
        handler = getattr(self, method)

        @wraps(handler)
        def cached(*args, **kwargs):
            return _served(slot, request, lambda: handler(*args, **kwargs))

        setattr(self, method, cached)

    def check_throttles(self, request):
        """A request the page cache may answer is counted by the throttle in the round trip that
        looks its page up: a hit costs one round trip to Redis, where the count and the lookup
        took two."""
        slot = self._slot_for(request)
        self._page_slot = slot
        throttles = self.get_throttles()
        if slot is None or len(throttles) != 1 or not hasattr(throttles[0], "counter"):
            return super().check_throttles(request)
        throttle = throttles[0]
        counter = throttle.counter(request, self)
        slot.lookup(counter=counter)
        if counter is not None and not throttle.allow_count(slot.count):
            self.throttled(request, throttle.wait())

    def _slot_for(self, request) -> PageSlot | None:
        renderer = getattr(request, "accepted_renderer", None)
        if renderer is None or renderer.format == "api" or not _cache_on(request):
            return None
        if getattr(self, request.method.lower(), None) is None:
            return None
        return PageSlot(request, variant=request.accepted_media_type, versioned=self.page_cache_versioned)
