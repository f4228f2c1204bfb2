"""Paragraph strategy: layout-aware paragraph segmentation of PDFs (the paper's contribution)."""

from .segmenter import Paragraph, SegmenterConfig, segment_pdf
from .strategy import SPEC, MyKnowledgeBase

__all__ = ["SPEC", "MyKnowledgeBase", "Paragraph", "SegmenterConfig", "segment_pdf"]
