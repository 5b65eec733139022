"""Image generation (notebook 09, Kaggle's "I'm Something of a Painter Myself"): paintings (the two domains of
pictures found and checked, images.zip written and read back), mifid (the competition's metric) and sample
(the generated photos and paintings, never bundled)."""
