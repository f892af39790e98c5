// Package decryption decrypts the SOPS-encrypted documents of a bundle with age
// identities, as Flux's kustomize-controller does for a Kustomization's
// spec.decryption: each encrypted object of a bundle is decrypted on its own (the
// documents of one encrypted file, which share its MAC, together), its MAC checked,
// and every other document passes as it is. The identities are handed in: nothing is
// read from the process's environment or files, as the sops command would.
package decryption

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// AgeKeySuffix ends the keys of a Secret whose values are age identities, as Flux
// names them.
const AgeKeySuffix = ".agekey"

// ParseAgeKeys reads the age identities of a Secret's data: each key ending in .agekey
// holds one or more, as age-keygen writes them. An error names the key, never its value.
func ParseAgeKeys(data map[string][]byte) ([]age.Identity, error) {
	var out []age.Identity
	for _, key := range sortedKeys(data) {
		if !strings.HasSuffix(key, AgeKeySuffix) {
			continue
		}
		ids, err := age.ParseIdentities(bytes.NewReader(data[key]))
		if err != nil {
			return nil, fmt.Errorf("key %s holds no age identity age-keygen wrote (AGE-SECRET-KEY-1…)", key)
		}
		out = append(out, ids...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("it has no key ending in %s holding an age identity", AgeKeySuffix)
	}
	return out, nil
}

func sortedKeys(data map[string][]byte) []string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Result says what Bundle decrypted.
type Result struct {
	// Documents is how many documents were decrypted.
	Documents int
}

// document is one YAML document of a bundle, and the MAC of the SOPS file it is part
// of ("" when it is not encrypted).
type document struct {
	raw []byte
	mac string
}

// Bundle decrypts every SOPS-encrypted document of data with identities and returns the
// bundle with those documents in plain text, in their places. A document that fails
// (no identity opens it, a MAC that does not match) is an error naming the object, and
// nothing is returned.
func Bundle(data []byte, identities []age.Identity) ([]byte, Result, error) {
	docs, err := split(data)
	if err != nil {
		return nil, Result{}, err
	}
	var res Result
	done := map[string]bool{}
	for i, d := range docs {
		if d.mac == "" || done[d.mac] {
			continue
		}
		done[d.mac] = true
		var members []int
		for j := i; j < len(docs); j++ {
			if docs[j].mac == d.mac {
				members = append(members, j)
			}
		}
		plain, err := decryptFile(docs, members, identities)
		if err != nil {
			return nil, Result{}, fmt.Errorf("%s: %w", describe(d.raw), err)
		}
		for k, j := range members {
			docs[j].raw = plain[k]
		}
		res.Documents += len(members)
	}
	var out bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(d.raw)
		if len(d.raw) > 0 && d.raw[len(d.raw)-1] != '\n' {
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), res, nil
}

// split reads the documents of data, noting those SOPS encrypted.
func split(data []byte) ([]document, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []document
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the bundle's documents: %w", err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		d := document{raw: raw}
		if bytes.Contains(raw, []byte("sops:")) {
			var probe struct {
				SOPS *struct {
					MAC          string `json:"mac"`
					LastModified string `json:"lastmodified"`
				} `json:"sops"`
			}
			if err := yaml.Unmarshal(raw, &probe); err == nil && probe.SOPS != nil && probe.SOPS.MAC != "" {
				d.mac = probe.SOPS.MAC + "\x00" + probe.SOPS.LastModified
			}
		}
		docs = append(docs, d)
	}
}

// decryptFile decrypts the documents of one SOPS file (members, in order), as the sops
// command decrypts a file, and returns each in plain text.
func decryptFile(docs []document, members []int, identities []age.Identity) ([][]byte, error) {
	parts := make([][]byte, 0, len(members))
	for _, j := range members {
		parts = append(parts, docs[j].raw)
	}
	store := sopsyaml.NewStore(&config.YAMLStoreConfig{Indent: 2})
	tree, err := store.LoadEncryptedFile(bytes.Join(parts, []byte("\n---\n")))
	if err != nil {
		return nil, fmt.Errorf("read its SOPS metadata: %w", err)
	}
	key, err := tree.Metadata.GetDataKeyWithKeyServices([]keyservice.KeyServiceClient{ageKeyService{identities: identities}}, nil)
	if err != nil {
		return nil, fmt.Errorf("no age identity given opens its data key (it is encrypted for %s)", recipients(tree.Metadata))
	}
	cipher := aes.NewCipher()
	mac, err := tree.Decrypt(key, cipher)
	if err != nil {
		return nil, fmt.Errorf("decrypt its values: %w", err)
	}
	recorded, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, key, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil || recorded != mac {
		// Neither MAC is said: each is a hash of the plain values.
		return nil, errors.New("its MAC does not match its values: it was changed after it was encrypted " +
			"(or its documents, one encrypted file, were reordered: encrypt one object per file)")
	}
	out := make([][]byte, 0, len(tree.Branches))
	for _, branch := range tree.Branches {
		plain, err := store.EmitPlainFile(sops.TreeBranches{branch})
		if err != nil {
			return nil, fmt.Errorf("write it decrypted: %w", err)
		}
		out = append(out, plain)
	}
	return out, nil
}

// recipients names the keys a file's data key is encrypted for, as sops lists them.
func recipients(m sops.Metadata) string {
	var names []string
	for _, group := range m.KeyGroups {
		for _, k := range group {
			names = append(names, k.TypeToIdentifier()+" key "+k.ToString())
		}
	}
	if len(names) == 0 {
		return "no key"
	}
	return strings.Join(names, ", ")
}

// describe names the object a document holds, for errors: its kind, namespace and name.
func describe(raw []byte) string {
	var meta struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil || meta.Kind == "" {
		return "a SOPS-encrypted document"
	}
	name := meta.Metadata.Name
	if meta.Metadata.Namespace != "" {
		name = meta.Metadata.Namespace + "/" + name
	}
	return meta.Kind + " " + name
}
