package ocisource

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// download fetches the artifact's manifest and streams its layer into dir.
func (c *Cache) download(ctx context.Context, t *target, digest, dir string) error {
	artifact := t.url + "@" + digest
	layer, err := c.singleLayer(ctx, t, digest)
	if err != nil {
		return err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return classify(err, artifact, "layer")
	}
	defer func() { _ = rc.Close() }()

	compressed := &countingReader{r: rc, max: c.limits.MaxArtifactBytes}
	err = c.unpack(compressed, dir, artifact, layer)
	if compressed.over {
		// Whatever the decompressor made of the cut-off stream, the cause is the limit.
		return &LimitError{Artifact: artifact, Limit: "MaxArtifactBytes", Max: c.limits.MaxArtifactBytes, Seen: compressed.n}
	}
	if size, sizeErr := layer.Size(); errors.Is(err, io.ErrUnexpectedEOF) && sizeErr == nil && compressed.n < size {
		// The stream ended before the layer's size: the download was cut, which may not
		// happen again; the artifact itself is not known to be broken.
		return fmt.Errorf("%s: the download ended after %d of %d bytes: %w", artifact, compressed.n, size, io.ErrUnexpectedEOF)
	}
	return err
}

// singleLayer fetches the manifest by digest and returns its one layer, refusing
// anything else before any content is downloaded.
func (c *Cache) singleLayer(ctx context.Context, t *target, digest string) (v1.Layer, error) {
	artifact := t.url + "@" + digest
	ref, err := name.NewDigest(t.repo.Name()+"@"+digest, t.nameOpts...)
	if err != nil {
		return nil, &InvalidError{Msg: fmt.Sprintf("%s: not a valid reference: %v", artifact, err)}
	}
	desc, err := remote.Get(ref, t.options(ctx)...)
	if err != nil {
		return nil, classify(err, t.url, "digest "+digest)
	}
	if desc.MediaType.IsIndex() {
		return nil, &InvalidArtifactError{Artifact: artifact, Reason: "the artifact is an image index, not a single tar+gzip layer"}
	}
	img, err := desc.Image()
	if err != nil {
		return nil, &InvalidArtifactError{Artifact: artifact, Reason: fmt.Sprintf("the manifest is not an image manifest: %v", err)}
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, &InvalidArtifactError{Artifact: artifact, Reason: fmt.Sprintf("the manifest cannot be read: %v", err)}
	}
	if len(m.Layers) != 1 {
		return nil, &InvalidArtifactError{Artifact: artifact, Reason: fmt.Sprintf(
			"the artifact is not a single tar+gzip layer (found %d layers%s)", len(m.Layers), mediaTypes(m.Layers))}
	}
	l := m.Layers[0]
	if len(l.URLs) > 0 {
		// Foreign layers would send the client to hosts the source never named.
		return nil, &InvalidArtifactError{Artifact: artifact, Reason: "the layer is stored at foreign URLs, which are not followed"}
	}
	if l.Size > c.limits.MaxArtifactBytes {
		return nil, &LimitError{Artifact: artifact, Limit: "MaxArtifactBytes", Max: c.limits.MaxArtifactBytes, Seen: l.Size}
	}
	layer, err := img.LayerByDigest(l.Digest)
	if err != nil {
		return nil, fmt.Errorf("%s: layer %s: %w", artifact, l.Digest, err)
	}
	return layer, nil
}

func mediaTypes(layers []v1.Descriptor) string {
	if len(layers) == 0 {
		return ""
	}
	var types []string
	for i, l := range layers {
		if i == 3 {
			types = append(types, "…")
			break
		}
		types = append(types, string(l.MediaType))
	}
	return " of media types " + strings.Join(types, ", ")
}

// unpack checks the stream is gzip, whatever the media type claimed (Flux's
// application/vnd.cncf.flux.content.v1.tar+gzip or any other), and extracts it. It reads
// the layer to its end, because the registry client checks the layer's digest only when
// the stream is exhausted.
func (c *Cache) unpack(compressed io.Reader, dir, artifact string, layer v1.Layer) error {
	br := bufio.NewReader(compressed)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: read layer: %w", artifact, err)
	}
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		mediaType, _ := layer.MediaType()
		return &InvalidArtifactError{Artifact: artifact, Reason: fmt.Sprintf(
			"the artifact is not a single tar+gzip layer: the layer is not gzip (media type %s)", mediaType)}
	}
	gz, err := gzip.NewReader(br)
	if err != nil {
		return corrupt(err, artifact, "read layer")
	}
	defer func() { _ = gz.Close() }()
	x := &extractor{dir: dir, artifact: artifact, limits: c.limits}
	if err := x.extract(gz); err != nil {
		return err
	}
	// After the tar's end only padding should follow; it counts against MaxBytes so a
	// layer cannot make us inflate without bound.
	rest := c.limits.MaxBytes - x.bytes
	n, err := io.Copy(io.Discard, io.LimitReader(gz, rest+1))
	if err != nil {
		return corrupt(err, artifact, "read layer")
	}
	if n > rest {
		return &LimitError{Artifact: artifact, Limit: "MaxBytes", Max: c.limits.MaxBytes, Seen: x.bytes + n}
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return corrupt(err, artifact, "read layer")
	}
	return nil
}

// corrupt classifies a failure while decompressing or reading the layer: a malformed
// stream is the artifact's fault; anything else (a broken connection, a digest that
// does not match what arrived) may not happen again.
func corrupt(err error, artifact, doing string) error {
	var flateErr flate.CorruptInputError
	if errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &flateErr) {
		return &InvalidArtifactError{Artifact: artifact, Reason: fmt.Sprintf("the layer is not a valid tar+gzip stream: %v", err), Err: err}
	}
	return fmt.Errorf("%s: %s: %w", artifact, doing, err)
}

// countingReader stops at max bytes and says so, so an oversized or lying layer is cut
// off rather than read to its end.
type countingReader struct {
	r    io.Reader
	max  int64
	n    int64
	over bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n >= c.max {
		// One byte more tells a layer of exactly max bytes from a larger one.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			c.n += int64(n)
			c.over = true
			return 0, errLimit
		}
		return 0, err
	}
	if rem := c.max - c.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

var errLimit = errors.New("size limit reached")
