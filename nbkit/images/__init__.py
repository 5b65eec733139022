"""Image classification from TFRecords in the kit's layout, for any competition's pictures (notebooks 02-07):
`flowers` (the worked example's facts and its data), `description` (nbkit-dataset.json), `layout` (folders,
names, counts), `checks` (every record read before training; the `Data` a notebook gets), `oof` (the folds
gathered), `writer` and `sample` (a generated learnable sample). Framework-free."""
