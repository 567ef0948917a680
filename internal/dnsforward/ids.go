package dnsforward

import "math/rand/v2"

// maxInFlight is the most queries Limits may let wait at once: a quarter
// of the 16-bit ID space, so that idSequence.next finds a free ID at once.
const maxInFlight = 1 << 14

// idSequence hands out the IDs under which UDP queries go upstream: a
// counter passed through a bijection of the 16-bit numbers with keys
// drawn at random, so that an ID comes again only after all 65,535 others
// have come, and one ID does not tell the next.
type idSequence struct{ n, mul, add uint16 }

func (s *idSequence) init() {
	r := rand.Uint64()
	s.n, s.mul, s.add = uint16(r), uint16(r>>16)|1, uint16(r>>32)
}

// next is the next ID that no query pending holds.
func (s *idSequence) next(pending map[uint16]*udpQuery) uint16 {
	for {
		s.n++
		// Each step is a bijection: a multiply by an odd number and an
		// add modulo 2^16, and a xor with the number shifted right.
		x := s.n*s.mul + s.add
		x ^= x >> 7
		x *= 0x6c8b
		x ^= x >> 9
		if pending[x] == nil {
			return x
		}
	}
}
