"""The paper's entry point, kept for familiarity and defined once for every registered strategy:
`MyKnowledgeBase(path, strategy="paragraph").initiate_document_injetion_pipeline()`, then `.retriever`.
"""

from __future__ import annotations

from ragstudy import registry
from ragstudy.config import StudyConfig
from ragstudy.pipeline import build_retriever


class MyKnowledgeBase:
    """A ParentDocumentRetriever of one registry strategy (`paragraph`, `fixed-size`, `newline`, …; default: the
    paper's), with the study's defaults for the profile picked by the machine (or `profile`)."""

    def __init__(self, pdf_source_folder_path: str, strategy: str = "paragraph", profile: str | None = None,
                 db_dir: str | None = None) -> None:
        self.pdf_source_folder_path = pdf_source_folder_path
        self.strategy = registry.get(strategy).name
        self.profile = profile
        self.db_dir = db_dir
        self.retriever = None

    def initiate_document_injetion_pipeline(self):
        config = StudyConfig.resolve(documents=self.pdf_source_folder_path, profile=self.profile,
                                     strategies=self.strategy, db_dir=self.db_dir)
        self.retriever, _ = build_retriever(config, self.strategy)
        return self.retriever
