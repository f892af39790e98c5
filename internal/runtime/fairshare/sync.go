package fairshare

// SyncShare bounds the workers of one kind of sync that the syncs of one source server
// hold, and those of one requester: a tenant whose syncs point at several slow servers
// holds no more than its share either. The zero value is ready to use.
type SyncShare struct {
	bySource    Slots[string]
	byRequester Slots[string]
}

// Take takes a slot of the server sourceURL names (at most perSource) and one of the
// requester (at most perRequester), or neither; limits <= 0 bound nothing. A sync that
// says nothing of who asked (requester "": where the API server records no requester
// and its author left the stamp out, or one made before) is bounded by its server alone:
// counted as one requester, every such sync of a hub that records none would share one
// requester's workers.
func (s *SyncShare) Take(sourceURL string, perSource int, requester string, perRequester int) (release func(), ok bool) {
	releaseSource, ok := s.bySource.Take(SourceKey(sourceURL), perSource)
	if !ok || requester == "" {
		return releaseSource, ok
	}
	releaseRequester, ok := s.byRequester.Take(requester, perRequester)
	if !ok {
		releaseSource()
		return nil, false
	}
	return func() { releaseRequester(); releaseSource() }, true
}
