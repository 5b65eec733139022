"""Image classification from TFRecords in the kit's layout, for any competition's pictures (what is one
competition's lives in `nbkit.competitions`): `description` (nbkit-dataset.json), `layout` (folders,
names, counts), `checks` (every record read before training; the `Data` a notebook gets), `metrics`
(scores, metrics.json, submission.csv, oof.csv), `oof` (the folds gathered), `plots`, `writer` and
`sample` (a generated learnable sample). Framework-free."""
