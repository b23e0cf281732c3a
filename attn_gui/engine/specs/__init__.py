"""Plain data about models: ``ModelSpec``, the family table (one row of declared differences per family) and
the encoder config fields. Reading a file is the readers' work; this room only describes."""
