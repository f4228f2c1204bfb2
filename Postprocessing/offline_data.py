"""Offline NLTK data for the metrics: WordNet (METEOR) and the Italian Snowball stopwords.

NLTK's downloader cannot reach the network here, and NLTK refuses data reached through symlinks, so the
Debian packages' files are *copied* once into ``<cache>/nltk_data`` (``$RAGSTUDY_CACHE`` or ``<repo>/.cache``)
and that folder is put first on ``nltk.data.path``. Nothing here ever touches the network.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from ragstudy.io import cache_dir as project_cache_dir

logger = logging.getLogger(__name__)

WORDNET_SOURCE = Path("/usr/share/wordnet")
STOPWORDS_IT_SOURCE = Path("/usr/share/perl5/Lingua/StopWords/IT.pm")
APT_LINE = (
    "apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index liblingua-stopwords-perl"
)
# Files NLTK's WordNetCorpusReader opens (index.sense comes from wordnet-sense-index).
WORDNET_FILES = (
    "data.adj", "data.adv", "data.noun", "data.verb",
    "index.adj", "index.adv", "index.noun", "index.verb",
    "adj.exc", "adv.exc", "noun.exc", "verb.exc",
    "index.sense", "cntlist.rev",
)
# lexnames(5WN): "file number, lexicographer file name, syntactic category" (1 noun, 2 verb, 3 adj, 4 adv).
# Debian ships the WordNet 3.0 database without this file; NLTK needs it.
LEXNAMES = (
    ("adj.all", 3), ("adj.pert", 3), ("adv.all", 4), ("noun.Tops", 1), ("noun.act", 1),
    ("noun.animal", 1), ("noun.artifact", 1), ("noun.attribute", 1), ("noun.body", 1),
    ("noun.cognition", 1), ("noun.communication", 1), ("noun.event", 1), ("noun.feeling", 1),
    ("noun.food", 1), ("noun.group", 1), ("noun.location", 1), ("noun.motive", 1), ("noun.object", 1),
    ("noun.person", 1), ("noun.phenomenon", 1), ("noun.plant", 1), ("noun.possession", 1),
    ("noun.process", 1), ("noun.quantity", 1), ("noun.relation", 1), ("noun.shape", 1),
    ("noun.state", 1), ("noun.substance", 1), ("noun.time", 1), ("verb.body", 2), ("verb.change", 2),
    ("verb.cognition", 2), ("verb.communication", 2), ("verb.competition", 2), ("verb.consumption", 2),
    ("verb.contact", 2), ("verb.creation", 2), ("verb.emotion", 2), ("verb.motion", 2),
    ("verb.perception", 2), ("verb.possession", 2), ("verb.social", 2), ("verb.stative", 2),
    ("verb.weather", 2), ("adj.ppl", 3),
)
SNOWBALL_ITALIAN_COUNT = 279  # size of the Snowball Italian list (same as NLTK's stopwords.words("italian"))


class OfflineDataError(RuntimeError):
    """A Debian package that provides offline NLTK data is missing."""


def cache_dir() -> Path:
    """The project cache folder (ragstudy.io.cache_dir: ``$RAGSTUDY_CACHE`` if set, else ``<repo>/.cache``)."""
    return project_cache_dir()


def nltk_data_dir() -> Path:
    """Folder holding the copied NLTK data (``<cache>/nltk_data``)."""
    return cache_dir() / "nltk_data"


def lexnames_text() -> str:
    """The ``lexnames`` file NLTK expects, generated from the lexnames(5WN) list."""
    return "".join(f"{i:02d}\t{name}\t{cat}\n" for i, (name, cat) in enumerate(LEXNAMES))


def _atomic_write_text(path: Path, text: str) -> None:
    """Write beside `path`, then rename (the project's writer: the file gets the umask's mode, not mkstemp's 0600)."""
    from ragstudy.io import atomic_write_text

    atomic_write_text(path, text)


def _require(path: Path, package: str) -> None:
    if not path.exists():
        raise OfflineDataError(
            f"{path} is missing: it comes from the Debian package {package!r}. Install the offline NLTK data "
            f"with: {APT_LINE}"
        )


def ensure_wordnet(target: Path | None = None) -> Path:
    """Copy WordNet 3.0 from /usr/share/wordnet into ``<nltk_data>/corpora/wordnet`` (idempotent)."""
    root = (target or nltk_data_dir()) / "corpora" / "wordnet"
    marker = root / ".complete"
    if marker.exists():
        return root
    for name in WORDNET_FILES:
        package = "wordnet-sense-index" if name == "index.sense" else "wordnet-base"
        _require(WORDNET_SOURCE / name, package)
    # Build in a sibling temp folder, then rename: a half-copied WordNet never becomes visible.
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=".wordnet."))
    for name in WORDNET_FILES:
        shutil.copyfile(WORDNET_SOURCE / name, tmp / name)
    (tmp / "lexnames").write_text(lexnames_text(), encoding="utf-8")
    (tmp / "README").write_text(
        f"Copied from {WORDNET_SOURCE} (Debian wordnet-base, wordnet-sense-index); lexnames generated from "
        "lexnames(5WN). WordNet 3.0 licence: https://wordnet.princeton.edu/license-and-commercial-use\n",
        encoding="utf-8",
    )
    (tmp / ".complete").write_text("ok\n", encoding="utf-8")
    if root.exists():  # an incomplete earlier copy (no marker)
        shutil.rmtree(root)
    try:
        os.replace(tmp, root)
    except OSError:
        # Another process finished first: keep its copy.
        shutil.rmtree(tmp, ignore_errors=True)
        if not marker.exists():
            raise
    logger.info("Copied WordNet into %s", root)
    return root


def read_debian_italian_stopwords(source: Path = STOPWORDS_IT_SOURCE) -> list[str]:
    """The Snowball Italian stopwords from Lingua::StopWords::IT (Debian liblingua-stopwords-perl), in order."""
    from ragstudy.errors import StudyInputError
    from ragstudy.lexical import italian_stopword_list  # the one parser of IT.pm (BM25 and oracle overlap use it)

    _require(source, "liblingua-stopwords-perl")
    try:
        words = italian_stopword_list(source)
    except StudyInputError as exc:
        raise OfflineDataError(str(exc)) from None
    if len(words) != SNOWBALL_ITALIAN_COUNT:
        logger.warning("%s: %d Italian stopwords, expected %d", source, len(words), SNOWBALL_ITALIAN_COUNT)
    return words


def ensure_stopwords(target: Path | None = None) -> Path:
    """Write ``<nltk_data>/corpora/stopwords/italian`` so ``stopwords.words('italian')`` works offline."""
    path = (target or nltk_data_dir()) / "corpora" / "stopwords" / "italian"
    if not path.exists():
        words = read_debian_italian_stopwords()
        _atomic_write_text(path, "\n".join(words) + "\n")
        logger.info("Wrote %d Italian stopwords to %s", len(words), path)
    return path


def ensure_nltk_data(wordnet: bool = True, stopwords: bool = True) -> Path:
    """Build what is asked for (once) and put the folder first on ``nltk.data.path``."""
    import nltk

    target = nltk_data_dir()
    if wordnet:
        ensure_wordnet(target)
    if stopwords:
        ensure_stopwords(target)
    if str(target) not in nltk.data.path:
        nltk.data.path.insert(0, str(target))
    return target


def italian_stopwords() -> frozenset[str]:
    """The Snowball Italian stopword set (via the offline NLTK corpus)."""
    ensure_nltk_data(wordnet=False, stopwords=True)
    from nltk.corpus import stopwords

    return frozenset(stopwords.words("italian"))


def wordnet_reader():  # -> nltk.corpus.reader.wordnet.WordNetCorpusReader
    """An NLTK WordNet reader over the copied folder (what METEOR uses for synonyms)."""
    ensure_nltk_data(wordnet=True, stopwords=False)
    from nltk.corpus import wordnet

    wordnet.ensure_loaded()
    return wordnet
