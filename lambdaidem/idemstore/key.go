package idemstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// MaxKeyLength is the longest key stored as it is. Longer keys, and keys
// that could be mistaken for a hashed one, are stored hashed (see
// StoredKey), so operators can still read ordinary keys while the store's
// key limit is never reached.
const MaxKeyLength = 250

// HashedKeyPrefix starts every key stored hashed: "sha256:" and the hex
// SHA-256 digest of the key's bytes.
const HashedKeyPrefix = "sha256:"

// StoredKey returns the form in which a key is stored and shown by the
// operator's tool. A key is stored as it is when it is at most MaxKeyLength
// bytes, valid UTF-8 and does not start with HashedKeyPrefix; any other key
// is stored as HashedKeyPrefix and the hex SHA-256 of its bytes.
//
// The encoding never gives two keys one record (short of a SHA-256
// collision): a key stored as it is never starts with the prefix, so it
// cannot equal a hashed form; two keys stored as they are are equal only if
// the keys are; and two hashed forms are equal only if the digests are. A
// key that is not valid UTF-8 is hashed from its raw bytes, never repaired,
// so two such keys stay apart, and the stored form is always valid UTF-8,
// which DynamoDB requires of a string.
func StoredKey(k string) string {
	if len(k) <= MaxKeyLength && utf8.ValidString(k) && !strings.HasPrefix(k, HashedKeyPrefix) {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return HashedKeyPrefix + hex.EncodeToString(sum[:])
}
