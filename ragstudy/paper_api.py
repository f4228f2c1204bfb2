"""The paper's entry points, kept for familiarity: `MyKnowledgeBase(path).initiate_document_injetion_pipeline()`.

Each strategy folder subclasses `PaperKnowledgeBase` with its registry name; everything else is the study's code.
"""

from __future__ import annotations

from typing import ClassVar

from .config import StudyConfig
from .pipeline import build_retriever


class PaperKnowledgeBase:
    """`MyKnowledgeBase(pdf_folder).initiate_document_injetion_pipeline()` -> a ParentDocumentRetriever.

    Subclasses set `strategy`. Uses the study's defaults for the profile picked by the machine (or `profile`).
    """

    strategy: ClassVar[str] = ""

    def __init__(self, pdf_source_folder_path: str, profile: str | None = None, db_dir: str | None = None) -> None:
        self.pdf_source_folder_path = pdf_source_folder_path
        self.profile = profile
        self.db_dir = db_dir
        self.retriever = None

    def initiate_document_injetion_pipeline(self):
        config = StudyConfig.resolve(documents=self.pdf_source_folder_path, profile=self.profile,
                                     strategies=self.strategy, db_dir=self.db_dir)
        self.retriever, _ = build_retriever(config, self.strategy)
        return self.retriever
