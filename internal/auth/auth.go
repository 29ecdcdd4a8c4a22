// Package auth issues and checks the shoppers' bearer tokens: HS256 JWTs
// whose subject is the user id.
package auth

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ErrInvalid means the token is missing, malformed, forged, expired, or signed
// with anything but HS256 (alg "none" included).
var ErrInvalid = errors.New("auth: invalid token")

// MinSecretLen is the shortest JWT_SECRET accepted: HS256 needs 256 bits.
const MinSecretLen = 32

// Tokens issues and verifies tokens with one secret.
type Tokens struct{ secret []byte }

// New returns Tokens for secret, which must be at least MinSecretLen bytes.
func New(secret string) (*Tokens, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("auth: JWT_SECRET must be at least %d bytes", MinSecretLen)
	}
	return &Tokens{secret: []byte(secret)}, nil
}

// Issue returns a token for userID that expires after ttl.
func (t *Tokens) Issue(userID int64, ttl time.Duration) (string, error) {
	if userID <= 0 {
		return "", fmt.Errorf("auth: user id %d: want a positive integer", userID)
	}
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(userID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(t.secret)
}

// Verify checks token and returns its user id.
func (t *Tokens) Verify(token string) (int64, error) {
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return t.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(5*time.Second),
	)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	id, err := strconv.ParseInt(claims.Subject, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != claims.Subject {
		return 0, fmt.Errorf("%w: subject %q is not a positive integer user id", ErrInvalid, claims.Subject)
	}
	return id, nil
}
