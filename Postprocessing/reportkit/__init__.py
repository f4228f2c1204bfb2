"""Pieces of ``Postprocessing/report.py``: reading a results folder (``inputs``), the page's building blocks and
their HTML/Markdown rendering (``blocks``), plotly figures (``figures``), one builder per report section
(``report_sections``) and a small headless-Chromium client for screenshots and console checks (``browser``)."""
