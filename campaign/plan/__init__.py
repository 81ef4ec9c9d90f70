"""Planning comparison batches: which pairs to ask next and how to pack them into 5-item HITs."""
