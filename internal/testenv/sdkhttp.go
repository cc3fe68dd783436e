package testenv

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// HTTPClient wraps an SDK client's HTTP client so that a response which
// arrives before net/http has finished writing the request is kept. Every
// client of the local stack (the tests' and the workshop harness's) uses
// it.
//
// Why: the SDK hands net/http a request body that, once the SDK has closed
// it, answers WriteTo with io.EOF as an error. The SDK closes it as soon as
// the response headers are in. net/http's write loop, after sending a
// body, reads it once more to check for extra bytes, with io.Copy, which
// uses WriteTo; when that read comes after the SDK's close (the server
// answered first, which a local emulator can do within microseconds, and a
// loaded CPU lets the write loop wait that long), the write fails, net/http
// closes the connection under the response still being read, and the SDK
// retries a request the server has already carried out: a second copy of a
// sent message, or a receive whose messages stay hidden for their
// visibility timeout. Offering net/http only Read and Close makes that
// last read an ordinary end of body.
func HTTPClient(next aws.HTTPClient) aws.HTTPClient { return bodyClient{next} }

type bodyClient struct{ next aws.HTTPClient }

func (c bodyClient) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r = r.WithContext(r.Context()) // a shallow copy; the SDK keeps its own
		r.Body = readCloser{r.Body}
	}
	return c.next.Do(r)
}

// readCloser hides every method of a body but Read and Close.
type readCloser struct{ body io.ReadCloser }

func (b readCloser) Read(p []byte) (int, error) { return b.body.Read(p) }
func (b readCloser) Close() error               { return b.body.Close() }
