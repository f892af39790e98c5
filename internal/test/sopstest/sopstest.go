// Package sopstest encrypts manifests for tests as the sops command does with
// `sops --encrypt --age <recipient>`: through the sops library, so that what the
// operator decrypts is what users commit.
package sopstest

import (
	"crypto/rand"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
)

// Options are the sops command's options that tests use.
type Options struct {
	// EncryptedRegex is --encrypted-regex: only values under keys that match are
	// encrypted ("" encrypts all).
	EncryptedRegex string
	// MACOnlyEncrypted is --mac-only-encrypted: the MAC covers the encrypted values
	// alone, so that a Kustomize overlay may change the rest.
	MACOnlyEncrypted bool
}

// SecretValues encrypts a Secret's values only, as Flux's guide has it: the rest of the
// object stays readable in review.
var SecretValues = Options{EncryptedRegex: "^(data|stringData)$"}

// NewIdentity is a new age identity, as age-keygen makes one.
func NewIdentity(t testing.TB) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatalf("generate an age identity: %v", err)
	}
	return id
}

// Encrypt encrypts the YAML documents of plain as one SOPS file for the age
// recipients.
func Encrypt(t testing.TB, plain []byte, opts Options, recipients ...string) []byte {
	t.Helper()
	store := sopsyaml.NewStore(&config.YAMLStoreConfig{Indent: 2})
	branches, err := store.LoadPlainFile(plain)
	if err != nil {
		t.Fatalf("read the plain file: %v", err)
	}
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		t.Fatal(err)
	}
	var group sops.KeyGroup
	for _, r := range recipients {
		mk, err := sopsage.MasterKeyFromRecipient(r)
		if err != nil {
			t.Fatalf("age recipient %s: %v", r, err)
		}
		if err := mk.Encrypt(dataKey); err != nil {
			t.Fatalf("encrypt the data key for %s: %v", r, err)
		}
		group = append(group, mk)
	}
	tree := sops.Tree{Branches: branches, Metadata: sops.Metadata{
		KeyGroups: []sops.KeyGroup{group}, EncryptedRegex: opts.EncryptedRegex, MACOnlyEncrypted: opts.MACOnlyEncrypted,
		Version: "3.13.1",
	}}
	cipher := aes.NewCipher()
	mac, err := tree.Encrypt(dataKey, cipher)
	if err != nil {
		t.Fatalf("encrypt: %v", err)
	}
	tree.Metadata.LastModified = time.Now().UTC().Truncate(time.Second)
	if tree.Metadata.MessageAuthenticationCode, err = cipher.Encrypt(mac, dataKey, tree.Metadata.LastModified.Format(time.RFC3339)); err != nil {
		t.Fatalf("encrypt the MAC: %v", err)
	}
	out, err := store.EmitEncryptedFile(tree)
	if err != nil {
		t.Fatalf("write the encrypted file: %v", err)
	}
	return out
}
