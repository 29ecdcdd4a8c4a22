package activity

import "time"

// validateWaitingRoom checks the waiting room's fields (docs/waiting-room.md).
func (a *Activity) validateWaitingRoom() error {
	if !a.WaitingRoom {
		switch {
		case a.AdmitPerSecond != 0:
			return invalid("admit_per_second", "is for a sale with waiting_room")
		case a.JoinPowBits != 0:
			return invalid("join_pow_bits", "is for a sale with waiting_room")
		}
		return nil
	}
	switch {
	case a.AdmitPerSecond < 1 || a.AdmitPerSecond > MaxAdmitPerSecond:
		return invalid("admit_per_second", "is required with waiting_room, between 1 and %d", MaxAdmitPerSecond)
	case a.AdmissionTTL != 0 && (a.AdmissionTTL < MinAdmissionTTL || a.AdmissionTTL > MaxAdmissionTTL || a.AdmissionTTL%time.Second != 0):
		return invalid("admission_ttl_seconds", "must be whole seconds between %d and %d",
			int(MinAdmissionTTL.Seconds()), int(MaxAdmissionTTL.Seconds()))
	case a.JoinPowBits < 0 || a.JoinPowBits > MaxJoinPowBits:
		return invalid("join_pow_bits", "must be between 0 and %d", MaxJoinPowBits)
	case a.Shards > 1:
		// The queue's counters and the sale's stock must be read in one
		// script, in one slot: a sharded sale's stock is in several
		// (docs/waiting-room.md, "Not yet").
		return invalid("waiting_room", "a sharded sale has no waiting room yet: shards must be 1")
	}
	return nil
}

// AdmissionTTLOrDefault is a's AdmissionTTL, DefaultAdmissionTTL when unset.
func (a *Activity) AdmissionTTLOrDefault() time.Duration {
	if a.AdmissionTTL <= 0 {
		return DefaultAdmissionTTL
	}
	return a.AdmissionTTL
}
