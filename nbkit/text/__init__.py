"""Text classification (notebook 08): competition (a text competition's CSV files read and checked, scores,
submission.csv in the sample's form) and sample (the generated Watson stand-in, never bundled)."""
