"""Per-format extractors: each turns an unpacked package into a stream of raw paragraphs.

An extractor is ``fn(root, options) -> Iterator[str]``; one yielded string is one paragraph (the unit
that becomes a document). Markup is removed here; prose filtering and de-duplication are ``clean``'s.
Libraries do the parsing: selectolax (HTML), rdata (R serialization), pysword (SWORD modules), the
stdlib ``email`` package (MIME).
"""

from __future__ import annotations

import email
import email.policy
import fnmatch
import functools
import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

_WS = re.compile(r"\s+")


def _squash(text: str) -> str:
    return _WS.sub(" ", text).strip()


def select_files(root: Path, include: tuple[str, ...], exclude: tuple[str, ...] = ()) -> list[Path]:
    """Files under ``root`` matching any include glob and no exclude glob, sorted for a stable order."""
    found: set[Path] = set()
    for pattern in include:
        found.update(p for p in root.glob(pattern) if p.is_file())
    rel = {p: p.relative_to(root).as_posix() for p in found}
    keep = [p for p in found if not any(fnmatch.fnmatch(rel[p], pat) or fnmatch.fnmatch(p.name, pat)
                                        for pat in exclude)]
    return sorted(keep)


def read_text(path: Path) -> str:
    """A text file as str, gunzipped if needed; undecodable bytes become U+FFFD (the filter drops them)."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def blank_line_paragraphs(text: str) -> Iterator[str]:
    """Hard-wrapped text: paragraphs are runs of non-blank lines."""
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        block = _squash(block)
        if block:
            yield block


# --- HTML -------------------------------------------------------------------------------------------

# Never prose: code, scripts, navigation and page furniture (Sphinx, javadoc, Qt, DocBook, rustdoc).
_HTML_DROP = ", ".join([
    "script", "style", "pre", "nav", "header", "footer", "head", "noscript", "svg", "math", "form",
    "div.highlight", "div.sphinxsidebar", "div.related", "div.footer", "div.navheader", "div.navfooter",
    "div.toc", "div.toctree-wrapper", "div.sidebar", "div.topic", "div.navigationbar", "div.top-nav", "div.sub-nav",
    "div.subNav", "div.topNav", "div.bottomNav", "div.navigation", "ul.navList", "div.sidebar-elems",
    "div.example-wrap", "div.breadcrumb", "ul.breadcrumb", "div.sphinxsidebarwrapper", "p.breadcrumb",
    "table.navigation", "div.rst-footer-buttons", "div.document-footer", "a.headerlink", "span.linenos",
    "div.search", "section.search", "div.admonition.seealso",
])
# Elements that end a paragraph; anything else (a, code, em, span, ...) is inline and joins its text.
_BLOCK_TAGS = frozenset("""p div li ul ol dl dt dd blockquote table thead tbody tfoot tr td th caption section
article aside main body h1 h2 h3 h4 h5 h6 br hr figure figcaption details summary fieldset center address""".split())


def _blocks(node) -> Iterator[str]:
    """Paragraph texts under ``node``: inline runs between block boundaries, depth first, in page order."""
    run: list[str] = []
    for child in node.iter(include_text=True):
        tag = child.tag
        if tag == "-text":
            run.append(child.text_content or "")
        elif tag in _BLOCK_TAGS:
            text = _squash("".join(run))
            if text:
                yield text
            run = []
            yield from _blocks(child)
        elif tag not in ("-comment", "_comment"):
            run.append(child.text(deep=True, separator=""))
    text = _squash("".join(run))
    if text:
        yield text


def html_paragraphs(html: str) -> Iterator[str]:
    """Paragraph texts of a page with code, scripts and navigation removed."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    for node in tree.css(_HTML_DROP):
        node.decompose()
    root = tree.body or tree.root
    if root is not None:
        yield from _blocks(root)


def extract_html(root: Path, options: dict) -> Iterator[str]:
    """HTML documentation pages (Debian *-doc packages)."""
    for path in select_files(root, options.get("include", ("**/*.html",)), options.get("exclude", ())):
        yield from html_paragraphs(read_text(path))


# --- POD (Perl documentation) ------------------------------------------------------------------------

_POD_CODE = re.compile(r"[A-Z]<(?:<+\s)?")


def _pod_inline(text: str) -> str:
    """Drop POD formatting codes (``B<x>``, ``L<text|target>``, ``C<< x >>``) and keep their text."""
    text = re.sub(r"[LX]<+\s*([^<>|]*?)(?:\|[^<>]*)?\s*>+", lambda m: m.group(1) if m.group(0)[0] == "L" else "", text)
    text = re.sub(r"E<(lt|gt|quot|sol|verbar)>", lambda m: {"lt": "<", "gt": ">", "quot": '"', "sol": "/",
                                                           "verbar": "|"}[m.group(1)], text)
    for _ in range(3):  # nested codes
        text = re.sub(r"[A-Z]<<+\s+(.*?)\s+>>+", r"\1", text)
        text = re.sub(r"[A-Z]<([^<>]*)>", r"\1", text)
    return text


def pod_paragraphs(text: str) -> Iterator[str]:
    """Ordinary POD paragraphs; commands (``=head1``), verbatim (indented) blocks and ``=begin`` regions dropped."""
    skipping = False
    for block in re.split(r"\n\s*\n", text):
        if not block.strip():
            continue
        if block.startswith("="):
            command = block.split(None, 1)[0]
            if command in ("=begin", "=for"):
                skipping = command == "=begin"
            elif command == "=end":
                skipping = False
            continue
        if skipping or block[:1] in (" ", "\t"):
            continue
        yield _squash(_pod_inline(block))


def extract_pod(root: Path, options: dict) -> Iterator[str]:
    """Perl's POD manuals."""
    for path in select_files(root, options.get("include", ("**/*.pod",)), options.get("exclude", ())):
        yield from pod_paragraphs(read_text(path))


# --- R serialized data (r-cran-janeaustenr) ----------------------------------------------------------

def read_rdb(rdx: Path) -> dict[str, object]:
    """Every object of an R lazy-load database (``.rdx`` index + ``.rdb`` blobs), via the rdata library.

    The index is an RDS file mapping names to (offset, length) in the ``.rdb``; each blob is a 4-byte
    length then a zlib stream of R serialization, which ``rdata`` parses.
    """
    import warnings

    import rdata

    index = rdata.read_rds(rdx)
    blob = rdx.with_suffix(".rdb").read_bytes()
    out: dict[str, object] = {}
    for name, (offset, length) in index["variables"].items():
        chunk = blob[int(offset):int(offset) + int(length)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Unknown file type: assumed RDS": the blob has no RDX header
            out[str(name)] = rdata.conversion.convert(rdata.parser.parse_data(zlib.decompress(chunk[4:])))
    return out


def extract_rdata(root: Path, options: dict) -> Iterator[str]:
    """Character vectors of lines (one per novel); blank lines separate paragraphs; ``skip`` names held out."""
    skip = set(options.get("skip", ()))
    for rdx in select_files(root, options.get("include", ("**/*.rdx",)), options.get("exclude", ())):
        for name, value in sorted(read_rdb(rdx).items()):
            if name in skip:
                continue
            try:
                lines = [str(x) if x is not None else "" for x in value]  # type: ignore[union-attr]
            except TypeError:
                continue
            yield from blank_line_paragraphs("\n".join(lines))


# --- SWORD Bible modules ------------------------------------------------------------------------------

_OSIS_NOTE = re.compile(r"<note\b.*?</note>", re.S)
_TAG = re.compile(r"<[^>]+>")


def osis_to_text(osis: str) -> str:
    """OSIS verse markup to plain text: footnotes out (a space in their place), tags stripped."""
    import html

    return _squash(html.unescape(_TAG.sub("", _OSIS_NOTE.sub(" ", osis))))


def extract_sword(root: Path, options: dict) -> Iterator[str]:
    """Each chapter of each Bible module (pysword reads the zText blocks and index)."""
    from pysword.modules import SwordModules

    sword_root = next((p.parent for p in sorted(root.glob("**/mods.d")) if p.is_dir()), None)
    if sword_root is None:
        return
    modules = SwordModules(str(sword_root))
    for module in sorted(modules.parse_modules()):
        conf = modules._modules[module]
        # commentaries (zCom, zCom4) are stored exactly like Bibles (zText, zText4), verse by verse
        conf["moddrv"] = {"zcom": "zText", "zcom4": "zText4"}.get(conf["moddrv"].lower(), conf["moddrv"])
        bible = modules.get_bible_from_module(module)
        # pysword inflates the whole book block again for every verse; keep the last few blocks.
        bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
        for testament in bible.get_structure().get_books().values():
            for book in testament:
                verses = list(bible.get_iter(books=[book.name], clean=False))  # one block read per book
                start = 0
                for length in book.chapter_lengths:
                    # dict.fromkeys: a commentary repeats one note for each verse of the range it covers
                    chapter = dict.fromkeys(osis_to_text(v) for v in verses[start:start + length])
                    text = " ".join(filter(None, chapter))
                    start += length
                    if text:
                        yield text


# --- MIME mail ----------------------------------------------------------------------------------------

_SIGNATURE = re.compile(r"^(-- ?|_{10,}|-{10,}|={10,})$")
_ATTRIBUTION = re.compile(r"(wrote|writes|said):\s*$", re.I)


def mail_body(raw: bytes) -> str:
    """The text/plain body of a message with quoted lines, attributions and signatures removed."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    try:
        part = message.get_body(preferencelist=("plain",))
        body = part.get_content() if part is not None else ""
    except (LookupError, KeyError, AssertionError, UnicodeError):
        return ""
    kept: list[str] = []
    for line in body.splitlines():
        stripped = line.strip()
        if _SIGNATURE.match(stripped):
            break
        if stripped.startswith((">", "|")) or _ATTRIBUTION.search(stripped):
            continue
        kept.append(line)
    return "\n".join(kept)


def extract_mime(root: Path, options: dict) -> Iterator[str]:
    """One raw RFC 822 message per file (SpamAssassin ham)."""
    for path in select_files(root, options.get("include", ("**/*",)), options.get("exclude", ())):
        yield from blank_line_paragraphs(mail_body(path.read_bytes()))


# --- JSON, plain text, fortunes ---------------------------------------------------------------------

def extract_json(root: Path, options: dict) -> Iterator[str]:
    """JSON arrays of strings (nlp-corpus: shuffled sentences, one paragraph each)."""
    for path in select_files(root, options.get("include", ("**/*.json",)), options.get("exclude", ())):
        try:
            items = json.loads(read_text(path))
        except json.JSONDecodeError:
            continue
        for item in items if isinstance(items, list) else []:
            if isinstance(item, str) and item.strip():
                yield _squash(item)


_BRACES = re.compile(r"\{([^{}]*)\}")


def extract_plain(root: Path, options: dict) -> Iterator[str]:
    """Hard-wrapped plain text; ``unbrace`` keeps the text of Jargon-File ``{cross references}``."""
    for path in select_files(root, options.get("include", ("**/*.txt",)), options.get("exclude", ())):
        text = read_text(path)
        if options.get("unbrace"):
            text = _BRACES.sub(r"\1", text)
        yield from blank_line_paragraphs(text)


_ATTRIB_LINE = re.compile(r"^\s*(--|—|~~)\s*\S")


def extract_fortune(root: Path, options: dict) -> Iterator[str]:
    """``%``-separated fortune cookies; attribution lines (``-- Author``) dropped."""
    for path in select_files(root, options.get("include", ("**/*",)), options.get("exclude", ())):
        for cookie in re.split(r"^%\s*$", read_text(path), flags=re.M):
            lines = [line for line in cookie.splitlines() if not _ATTRIB_LINE.match(line)]
            yield from blank_line_paragraphs("\n".join(lines))


_TIMESTAMP = re.compile(r"^\s*\d+(?:\.\d+)?\s*$")


def extract_subtitles(root: Path, options: dict) -> Iterator[str]:
    """Speaker-turned subtitles (``# NAME`` turns, timestamp lines, ``**LOL**`` marks): one turn each."""
    for path in select_files(root, options.get("include", ("**/*.merged",)), options.get("exclude", ())):
        for turn in re.split(r"^#.*$", read_text(path), flags=re.M):
            lines = [line for line in turn.splitlines()
                     if line.strip() and not _TIMESTAMP.match(line) and not line.strip().startswith("**")]
            text = _squash(" ".join(lines))
            if text:
                yield text


EXTRACTORS: dict[str, Callable[[Path, dict], Iterator[str]]] = {
    "html": extract_html,
    "pod": extract_pod,
    "rdata": extract_rdata,
    "sword": extract_sword,
    "mime": extract_mime,
    "json": extract_json,
    "plain": extract_plain,
    "fortune": extract_fortune,
    "subtitles": extract_subtitles,
}
