package decryption_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/engine/manifest"
	"github.com/vidra-operator/vidra/internal/source/bundle"
	"github.com/vidra-operator/vidra/internal/source/decryption"
	"github.com/vidra-operator/vidra/internal/test/sopstest"
)

const secret = `apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: shop
stringData:
  password: hunter2-but-longer
`

const configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
data:
  mode: fast
`

func TestBundleDecryptsEncryptedDocumentsInPlace(t *testing.T) {
	id := sopstest.NewIdentity(t)
	enc := sopstest.Encrypt(t, []byte(secret), sopstest.SecretValues, id.Recipient().String())
	if bytes.Contains(enc, []byte("hunter2")) {
		t.Fatal("the fixture is not encrypted")
	}
	bundle := []byte(configMap + "---\n" + string(enc) + "---\n" + strings.ReplaceAll(configMap, "settings", "more"))

	out, res, err := decryption.Bundle(bundle, []age.Identity{id})
	if err != nil {
		t.Fatal(err)
	}
	if res.Documents != 1 {
		t.Errorf("decrypted %d documents, want 1", res.Documents)
	}
	objs, err := manifest.Decode(out)
	if err != nil {
		t.Fatalf("the decrypted bundle does not decode: %v\n%s", err, out)
	}
	if len(objs) != 3 || objs[1].GetKind() != "Secret" || objs[0].GetKind() != "ConfigMap" {
		t.Fatalf("objects out of place: %v", objs)
	}
	if _, has := objs[1].Object["sops"]; has {
		t.Error("the SOPS metadata stays in the decrypted Secret")
	}
	if got, _, _ := unstructured.NestedString(objs[1].Object, "stringData", "password"); got != "hunter2-but-longer" {
		t.Errorf("password = %q", got)
	}
}

func TestBundleDecryptsAMultiDocumentFileTogether(t *testing.T) {
	id := sopstest.NewIdentity(t)
	enc := sopstest.Encrypt(t, []byte(secret+"---\n"+strings.ReplaceAll(secret, "name: db", "name: cache")), sopstest.Options{}, id.Recipient().String())
	out, res, err := decryption.Bundle(append([]byte(configMap+"---\n"), enc...), []age.Identity{id})
	if err != nil {
		t.Fatal(err)
	}
	if res.Documents != 2 || bytes.Count(out, []byte("hunter2-but-longer")) != 2 {
		t.Errorf("decrypted %d documents:\n%s", res.Documents, out)
	}
}

func TestBundleRefusesAWrongKeyATamperedFileAndOtherKeyTypes(t *testing.T) {
	id := sopstest.NewIdentity(t)
	enc := sopstest.Encrypt(t, []byte(secret), sopstest.SecretValues, id.Recipient().String())
	wrong := sopstest.NewIdentity(t)

	_, _, err := decryption.Bundle(enc, []age.Identity{wrong})
	if err == nil || !strings.Contains(err.Error(), "Secret shop/db") || !strings.Contains(err.Error(), id.Recipient().String()) {
		t.Errorf("a wrong key: %v, want an error naming the Secret and the recipient", err)
	}

	tampered := bytes.Replace(enc, []byte("namespace: shop"), []byte("namespace: prod"), 1)
	_, _, err = decryption.Bundle(tampered, []age.Identity{id})
	if err == nil || !strings.Contains(err.Error(), "MAC does not match") {
		t.Errorf("a tampered file: %v, want its MAC refused", err)
	}

	noAge := bytes.Replace(enc, []byte("age:"), []byte("age_: "), 1)
	if _, _, err = decryption.Bundle(noAge, []age.Identity{id}); err == nil {
		t.Error("a file encrypted for no age key was decrypted")
	}
	for _, e := range []error{err} {
		if e != nil && strings.Contains(e.Error(), "hunter2") {
			t.Errorf("an error holds a plain value: %v", e)
		}
	}
}

func TestBundleLeavesAPlainBundleAsItIs(t *testing.T) {
	id := sopstest.NewIdentity(t)
	in := []byte(configMap + "---\n" + "# sops: a comment, not metadata\n" + strings.ReplaceAll(configMap, "settings", "more"))
	out, res, err := decryption.Bundle(in, []age.Identity{id})
	if err != nil || res.Documents != 0 {
		t.Fatalf("%v, %d documents", err, res.Documents)
	}
	if objs, err := manifest.Decode(out); err != nil || len(objs) != 2 {
		t.Errorf("%v, %d objects", err, len(objs))
	}
}

func TestParseAgeKeysReadsOnlyAgeKeyEntries(t *testing.T) {
	a, b := sopstest.NewIdentity(t), sopstest.NewIdentity(t)
	ids, err := decryption.ParseAgeKeys(map[string][]byte{
		"one.agekey":   []byte("# created: now\n" + a.String() + "\n"),
		"two.agekey":   []byte(b.String()),
		"README":       []byte("not a key"),
		"identity.pub": []byte(a.Recipient().String()),
	})
	if err != nil || len(ids) != 2 {
		t.Fatalf("%v, %d identities", err, len(ids))
	}
	_, err = decryption.ParseAgeKeys(map[string][]byte{"bad.agekey": []byte("AGE-SECRET-KEY-1NOTAKEY")})
	if err == nil || strings.Contains(err.Error(), "NOTAKEY") || !strings.Contains(err.Error(), "bad.agekey") {
		t.Errorf("a bad key: %v, want an error naming the key, not its value", err)
	}
	if _, err = decryption.ParseAgeKeys(map[string][]byte{"key": []byte(a.String())}); err == nil {
		t.Error("a Secret with no .agekey entry gave identities")
	}
}

// A Kustomize overlay that sets the namespace of an encrypted Secret changes a value its
// MAC covers: refused, unless it was encrypted with --mac-only-encrypted, as the docs
// say.
func TestKustomizeOverlaysNeedMACOnlyEncrypted(t *testing.T) {
	id := sopstest.NewIdentity(t)
	plain := strings.ReplaceAll(secret, "  namespace: shop\n", "")
	for _, tc := range []struct {
		opts sopstest.Options
		ok   bool
	}{
		{sopstest.SecretValues, false},
		{sopstest.Options{EncryptedRegex: sopstest.SecretValues.EncryptedRegex, MACOnlyEncrypted: true}, true},
	} {
		dir := t.TempDir()
		write(t, dir, "kustomization.yaml", "namespace: shop\nresources: [db.enc.yaml]\n")
		write(t, dir, "db.enc.yaml", string(sopstest.Encrypt(t, []byte(plain), tc.opts, id.Recipient().String())))
		built, err := bundle.Build(dir, ".", bundle.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := decryption.Bundle(built, []age.Identity{id})
		switch {
		case tc.ok && (err != nil || !bytes.Contains(out, []byte("hunter2-but-longer")) || !bytes.Contains(out, []byte("namespace: shop"))):
			t.Errorf("--mac-only-encrypted: %v\n%s", err, out)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "Secret shop/db: its MAC does not match")):
			t.Errorf("a MAC over every value: %v, want it refused", err)
		}
	}
}

func write(t *testing.T, dir, name, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
