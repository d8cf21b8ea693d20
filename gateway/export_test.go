package gateway

// LedgerBatches reports the ledger rows g's meter has written and the
// writes that wrote them, for the benchmarks' batch size.
func LedgerBatches(g *Gateway) (rows, writes uint64) { return g.meter.batches() }
