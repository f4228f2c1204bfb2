"""The text-cleaning rules of the study, in one place: the paragraph strategy (RAGParagraph) segments what they leave,
and the clean text layer (`text_layer: clean`) applies them to the shared text layer that the other strategies read.

- `lines`: one MuPDF pass per page into line records; ligatures, odd spaces, symbol-font bullets, LaTeX accents.
- `furniture`: running heads and feet (by repetition and by pattern), page numbers, table-of-contents pages.
- `layer`: the clean text layer: the furniture-free blocks, lines joined with hyphenation undone, sentences joined
  across page and column breaks, every character still mapped to its page.
"""
