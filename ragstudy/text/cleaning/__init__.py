"""The text-cleaning rules of the study, in one place: the paragraph strategy (RAGParagraph) segments what they leave,
and the clean text layer (`text_layer: clean`) applies them to the shared text layer that the other strategies read
(`lines`: line records, `furniture`: running heads, page numbers, TOC pages, `layer`; docs/text-layer.md).
"""
