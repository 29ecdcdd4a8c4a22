package mysqlstore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Endpoints' secrets at rest. HMAC signs with the secret itself, so the
// record must be able to give it back: it is encrypted, not hashed, with
// AES-256-GCM (the standard library's crypto/aes and crypto/cipher) under
// WEBHOOK_SECRET_KEY, so that a dump of the database without that key
// cannot sign a webhook. A stored value is
//
//	enc1:<base64(nonce(12) | ciphertext | tag(16))>
//
// and anything else is a secret stored before the key existed, read as it
// is ("whsec_…") and encrypted at its next write or by
// `api encrypt-webhook-secrets`. The column's name is the associated data:
// a value copied from secret to previous_secret, or from another table,
// does not open. (Not the endpoint's id: a secret is encrypted before the
// insert that gives the id.)
//
// Rotation of the key: the new key as WEBHOOK_SECRET_KEY and the old one as
// WEBHOOK_SECRET_KEY_OLD, then `api encrypt-webhook-secrets` (every row
// under the new key), then the old key unset. Reads try the current key,
// then the old.

// encPrefix marks an encrypted secret.
const encPrefix = "enc1:"

// SecretKeyLen is the length of WEBHOOK_SECRET_KEY once decoded: AES-256.
const SecretKeyLen = 32

// ErrSecretKey is a stored secret that no configured key opens: the key is
// missing or not the one it was encrypted with.
var ErrSecretKey = errors.New("mysqlstore: webhook secret: no configured key opens it (WEBHOOK_SECRET_KEY, WEBHOOK_SECRET_KEY_OLD)")

// SecretKeys are the keys of the endpoints' secrets: Current encrypts and
// opens, Old only opens (during a key rotation). Both nil: secrets are
// stored as they are.
type SecretKeys struct {
	Current []byte
	Old     []byte
}

// ParseSecretKey decodes a key from its base64 (standard or URL encoding,
// padded or not): "" is no key.
func ParseSecretKey(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != SecretKeyLen {
				return nil, fmt.Errorf("a key of %d bytes; want %d (openssl rand -base64 32)", len(k), SecretKeyLen)
			}
			return k, nil
		}
	}
	return nil, errors.New("not base64 (openssl rand -base64 32)")
}

// secretBox seals and opens the secrets' columns.
type secretBox struct {
	current, old cipher.AEAD // nil: none
}

func newSecretBox(keys SecretKeys) (*secretBox, error) {
	b := &secretBox{}
	for _, k := range []struct {
		key []byte
		dst *cipher.AEAD
	}{{keys.Current, &b.current}, {keys.Old, &b.old}} {
		if k.key == nil {
			continue
		}
		block, err := aes.NewCipher(k.key)
		if err != nil || len(k.key) != SecretKeyLen {
			return nil, fmt.Errorf("mysqlstore: webhook secret key: want %d bytes: %v", SecretKeyLen, err)
		}
		if *k.dst, err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	if b.current == nil && b.old != nil {
		return nil, errors.New("mysqlstore: WEBHOOK_SECRET_KEY_OLD without WEBHOOK_SECRET_KEY")
	}
	return b, nil
}

// Encrypts says whether secrets are written encrypted.
func (b *secretBox) encrypts() bool { return b.current != nil }

// seal returns what column stores for secret: encrypted under the current
// key, or as it is when there is none. "" stays "" (no previous secret).
func (b *secretBox) seal(column, secret string) string {
	if secret == "" || b.current == nil {
		return secret
	}
	nonce := make([]byte, b.current.NonceSize())
	_, _ = rand.Read(nonce) // never fails on Linux (Go 1.24+ crashes instead)
	return encPrefix + base64.StdEncoding.EncodeToString(b.current.Seal(nonce, nonce, []byte(secret), []byte(column)))
}

// open returns the secret column stores as stored, and whether it is
// sealed under the current key already (false for a plaintext value and
// one only the old key opens: the next write seals it again).
func (b *secretBox) open(column, stored string) (secret string, current bool, err error) {
	if !strings.HasPrefix(stored, encPrefix) {
		return stored, stored == "" || b.current == nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(stored[len(encPrefix):])
	if err != nil {
		return "", false, fmt.Errorf("%w: %s is not base64", ErrSecretKey, column)
	}
	for i, aead := range []cipher.AEAD{b.current, b.old} {
		if aead == nil || len(raw) < aead.NonceSize()+aead.Overhead() {
			continue
		}
		n := aead.NonceSize()
		if plain, err := aead.Open(nil, raw[:n], raw[n:], []byte(column)); err == nil {
			return string(plain), i == 0, nil
		}
	}
	return "", false, fmt.Errorf("%w: %s", ErrSecretKey, column)
}
