package waitingroom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cristalhq/jwt/v4"

	"github.com/flashsale/flashsale/internal/auth"
)

// MinSecretLen is the shortest admission secret accepted (HS256: 256 bits).
const MinSecretLen = 32

// admissionAudience marks an admission token apart from a shopper's bearer
// token: the two may share nothing, but if ADMISSION_SECRET were set to
// JWT_SECRET a bearer token still could not pass as an admission.
const admissionAudience = "flashsale-admission"

// leeway is the clock skew allowed between the api that signed an admission
// and the one that checks it.
const leeway = 2 * time.Second

// Signer signs and checks admission tokens and proof-of-work challenges
// with one secret, in the api process: checking costs no Redis round trip.
type Signer struct {
	secret []byte
	now    func() time.Time
	hs     *jwt.HSAlg   // HS256, its HMACs pooled
	issue  *jwt.Builder // its header encoded once
}

// NewSigner returns a Signer for secret (at least MinSecretLen bytes).
func NewSigner(secret string) (*Signer, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("waitingroom: ADMISSION_SECRET must be at least %d bytes", MinSecretLen)
	}
	hs, err := jwt.NewSignerHS(jwt.HS256, []byte(secret))
	if err != nil {
		return nil, fmt.Errorf("waitingroom: %w", err)
	}
	return &Signer{secret: []byte(secret), now: time.Now, hs: hs, issue: jwt.NewBuilder(hs)}, nil
}

// DeriveSecret is the admission secret when ADMISSION_SECRET is not set:
// an HMAC of JWT_SECRET, so every api of a deployment derives the same one
// and it is as secret as JWT_SECRET, yet neither reveals the other.
func DeriveSecret(jwtSecret string) string {
	m := hmac.New(sha256.New, []byte(jwtSecret))
	m.Write([]byte("flashsale admission secret v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issuedAdmission are the claims Issue writes: the fields and form
// golang-jwt's RegisteredClaims wrote before 2026-11-30 (the audience an
// array, the expiry in whole seconds), so the tokens are the same bytes
// (TestAdmit_sameTokenAsGolangJWT) and apis of either version check each
// other's.
type issuedAdmission struct {
	Sub  string   `json:"sub"`
	Aud  []string `json:"aud"`
	Exp  int64    `json:"exp"`
	Sale int64    `json:"sale"`
}

// admissionClaims are what Verify reads of a token's claims.
type admissionClaims struct {
	Sub  string       `json:"sub"`
	Aud  jwt.Audience `json:"aud"` // a string or an array, as RFC 7519 allows
	Exp  *float64     `json:"exp"`
	Nbf  *float64     `json:"nbf"`
	Sale int64        `json:"sale"`
}

// Issue returns the admission token of user in sale, good until until: an
// HS256 JWT (the library of the shoppers' tokens) with the user as subject,
// the sale, and until as its expiry. The same arguments give the same token.
func (s *Signer) Issue(user, sale int64, until time.Time) (string, error) {
	tok, err := s.issue.Build(issuedAdmission{Sub: strconv.FormatInt(user, 10),
		Aud: []string{admissionAudience}, Exp: until.Unix(), Sale: sale})
	if err != nil {
		return "", fmt.Errorf("waitingroom: admission: %w", err)
	}
	return tok.String(), nil
}

// Verify checks that token admits user to sale now: signed with the secret
// (HS256 only), not expired, and bound to that user and that sale. Any
// failure is ErrNotAdmitted, wrapped with why.
func (s *Signer) Verify(token string, user, sale int64) error {
	if token == "" {
		return fmt.Errorf("%w: no Admission-Token", ErrNotAdmitted)
	}
	var c admissionClaims
	err := jwt.ParseClaims([]byte(token), s.hs, &c) // the signature, and HS256 alone
	if err == nil {
		_, err = auth.CheckTimes(c.Exp, c.Nbf, s.now(), leeway)
	}
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrNotAdmitted, err)
	case !slices.Contains(c.Aud, admissionAudience):
		return fmt.Errorf("%w: not an admission (audience %q)", ErrNotAdmitted, []string(c.Aud))
	case c.Sub != strconv.FormatInt(user, 10):
		return fmt.Errorf("%w: the admission is another user's", ErrNotAdmitted)
	case c.Sale != sale:
		return fmt.Errorf("%w: the admission is for another sale", ErrNotAdmitted)
	}
	return nil
}

// Challenge is a proof-of-work challenge: the client finds a nonce whose
// SHA-256 of Challenge + ":" + nonce starts with Bits zero bits.
type Challenge struct {
	Challenge string
	Bits      int
	ExpiresAt time.Time
}

// challengeTTL is how long a challenge may be answered.
const challengeTTL = 10 * time.Minute

// maxNonceLen bounds a nonce: it is hashed once, whatever its length.
const maxNonceLen = 64

// NewChallenge returns a challenge for user joining sale with bits of work:
// "<sale>.<user>.<expiry unix>.<mac>", its MAC over the rest with the
// secret, so checking it needs no state (nothing in Redis per challenge).
func (s *Signer) NewChallenge(user, sale int64, bits int) Challenge {
	exp := s.now().Add(challengeTTL).Unix()
	body := strconv.FormatInt(sale, 10) + "." + strconv.FormatInt(user, 10) + "." + strconv.FormatInt(exp, 10)
	return Challenge{Challenge: body + "." + s.mac(body), Bits: bits, ExpiresAt: time.Unix(exp, 0).UTC()}
}

func (s *Signer) mac(body string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("pow:" + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// Proof values that are not a count of zero bits (queue.lua's ARGV[4]).
const (
	proofNone    = -2 // no proof sent
	proofForeign = -1 // a challenge not ours: forged, expired, another user's or sale's
)

// ProofBits checks a proof of work (challenge, nonce) of user joining sale
// and returns the leading zero bits of its hash, or proofNone when none was
// sent, or proofForeign when the challenge is not one this service gave
// that user for that sale in the last challengeTTL. O(1): one HMAC and one
// SHA-256. Replaying a proof gains nothing: it is bound to the user, who
// has one place whatever they send.
func (s *Signer) ProofBits(challenge, nonce string, user, sale int64) int {
	if challenge == "" && nonce == "" {
		return proofNone
	}
	parts := strings.Split(challenge, ".")
	if len(parts) != 4 || len(nonce) == 0 || len(nonce) > maxNonceLen {
		return proofForeign
	}
	body := parts[0] + "." + parts[1] + "." + parts[2]
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || !hmac.Equal([]byte(parts[3]), []byte(s.mac(body))) ||
		parts[0] != strconv.FormatInt(sale, 10) || parts[1] != strconv.FormatInt(user, 10) || s.now().Unix() > exp {
		return proofForeign
	}
	return LeadingZeroBits(challenge, nonce)
}

// LeadingZeroBits is the count of leading zero bits of SHA-256(challenge +
// ":" + nonce): what a proof of work is measured by.
func LeadingZeroBits(challenge, nonce string) int {
	h := sha256.Sum256([]byte(challenge + ":" + nonce))
	n := 0
	for i := 0; i < len(h); i += 8 {
		w := binary.BigEndian.Uint64(h[i:])
		n += bits.LeadingZeros64(w)
		if w != 0 {
			break
		}
	}
	return n
}

// Errors of the waiting room.
var (
	// ErrNoWaitingRoom: the sale has no waiting room.
	ErrNoWaitingRoom = errors.New("waitingroom: the sale has no waiting room")
	// ErrNotInQueue: the user has not joined the sale's queue.
	ErrNotInQueue = errors.New("waitingroom: not in the queue")
	// ErrAdmissionExpired: the user was admitted, and the admission lapsed
	// unused; it is not renewed (one place per user).
	ErrAdmissionExpired = errors.New("waitingroom: admission expired")
	// ErrPowRequired: the sale's join needs a proof of work and none came.
	ErrPowRequired = errors.New("waitingroom: proof of work required")
	// ErrPowInvalid: the proof of work sent is not good: a challenge not
	// given to this user for this sale (or expired), or too few zero bits.
	ErrPowInvalid = errors.New("waitingroom: proof of work invalid")
	// ErrNotAdmitted: an order or group in a waiting-room sale without a
	// valid admission token for its user and sale.
	ErrNotAdmitted = errors.New("waitingroom: not admitted")
)
