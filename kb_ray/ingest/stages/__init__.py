"""The ingest stages: small Ray-free classes, each ``run(table) -> (table, StageStats)``.

In pipeline order (``kb_ray/ingest/pipeline.py`` wires them onto Ray Data):
:class:`~.fetch.FetchStage` → [:class:`~.model_parse.ModelParseStage`] →
:class:`~.parse.ParseStage` → [:class:`~.caption.CaptionStage`] →
[:class:`~.render.RenderStage` → :class:`~.page_embed.PageEmbedStage`] →
[:class:`~.concepts.ConceptStage`] → :class:`~.embed_write.EmbedWriteStage`. The records between them are declared in
:mod:`kb_ray.ingest.record`.
"""
