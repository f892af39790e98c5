package decryption

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"
	"filippo.io/age/armor"
	"github.com/getsops/sops/v3/keyservice"
	"google.golang.org/grpc"
)

// dataKeyLimit bounds what a data key decrypts to: SOPS's are 32 bytes.
const dataKeyLimit = 1 << 10

// ageKeyService opens SOPS data keys with the age identities it holds, in process. It
// stands in for sops's local key service, which would look for identities in the
// process's environment and home directory, and would reach cloud KMSs.
type ageKeyService struct {
	identities []age.Identity
}

var _ keyservice.KeyServiceClient = ageKeyService{}

// Encrypt is not done here: the operator only decrypts.
func (ageKeyService) Encrypt(context.Context, *keyservice.EncryptRequest, ...grpc.CallOption) (*keyservice.EncryptResponse, error) {
	return nil, errors.New("the operator does not encrypt")
}

// Decrypt opens an age-encrypted data key; a key of any other type is refused.
func (s ageKeyService) Decrypt(_ context.Context, req *keyservice.DecryptRequest, _ ...grpc.CallOption) (*keyservice.DecryptResponse, error) {
	if _, ok := req.GetKey().GetKeyType().(*keyservice.Key_AgeKey); !ok {
		return nil, fmt.Errorf("a %T key: only age identities are read", req.GetKey().GetKeyType())
	}
	if len(s.identities) == 0 {
		return nil, errors.New("no age identity")
	}
	r, err := age.Decrypt(armor.NewReader(bytes.NewReader(req.GetCiphertext())), s.identities...)
	if err != nil {
		return nil, fmt.Errorf("open the data key: %w", err)
	}
	key, err := io.ReadAll(io.LimitReader(r, dataKeyLimit+1))
	if err != nil {
		return nil, fmt.Errorf("open the data key: %w", err)
	}
	if len(key) > dataKeyLimit {
		return nil, errors.New("the data key is over 1 KiB: not a SOPS data key")
	}
	return &keyservice.DecryptResponse{Plaintext: key}, nil
}
