package content_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/engine/content"
)

// TestSealedContentIsNamedByItsAddressAndVerifiedByItsChunk0: content a sync decrypted
// is stored under an address that is no hash of its bytes, read back whole (over
// several chunks, by a fresh store, so not from memory), with a checksum that is a
// function of the address, and a damaged copy is refused as unsealed content is.
func TestSealedContentIsNamedByItsAddressAndVerifiedByItsChunk0(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 4<<10)
	data := incompressible(7, 20<<10)
	address := content.Digest([]byte("what it was made from"))

	checksum, err := s.PutSealed(ctx, address, data)
	if err != nil {
		t.Fatal(err)
	}
	if checksum == content.MD5(data) || checksum != content.MD5([]byte(address)) {
		t.Errorf("checksum %s: want the MD5 of the address, never of the bytes", checksum)
	}
	fresh := &content.Store{Client: s.Client, Reader: s.Reader, Namespace: s.Namespace}
	got, err := fresh.Get(ctx, address)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	info, err := fresh.Stat(ctx, address)
	if err != nil || info.MD5 != checksum {
		t.Errorf("stat: %+v, %v", info, err)
	}
	for _, c := range chunks(t, s) {
		for k, v := range c.Annotations {
			if strings.Contains(v, strings.TrimPrefix(content.Digest(data), "sha256:")) && k != content.SealedSHA256Annotation {
				t.Errorf("chunk %s says the content's own digest in %s", c.Name, k)
			}
		}
	}

	// Stored again, as a copy to another namespace would: nothing changes.
	before := len(chunks(t, s))
	if err := s.PutAs(ctx, address, data); err != nil {
		t.Fatal(err)
	}
	if n := len(chunks(t, s)); n != before || n < 2 {
		t.Errorf("%d chunks after storing it again, want the %d there were", n, before)
	}

	// Chunk 0 claiming other bytes: refused.
	head := chunks(t, s)[0]
	for _, c := range chunks(t, s) {
		if c.Name == content.ChunkName(address, 0) {
			head = c
		}
	}
	head.Annotations[content.SealedSHA256Annotation] = content.Digest([]byte("other"))
	if err := s.Client.Update(ctx, &head); err != nil {
		t.Fatal(err)
	}
	fresh = &content.Store{Client: s.Client, Reader: s.Reader, Namespace: s.Namespace}
	if _, err := fresh.Get(ctx, address); !errors.Is(err, content.ErrUnavailable) {
		t.Errorf("a chunk 0 that records other bytes: %v, want ErrUnavailable", err)
	}
}
