package waitingroom

// SetFastRead turns the poll's fast path on or off (the bench compares).
func (s *Service) SetFastRead(on bool) { s.noFastRead = !on }
