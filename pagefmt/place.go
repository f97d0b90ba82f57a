package pagefmt

import "errors"

// Placer writes a delivered part's stored bytes where the caller keeps
// them, without handing them over first: a GPU writes each page's object
// straight into the store's memory (registered with it through Pinner), so
// the caller copies nothing. A part comes with Place set only when its
// Batch asked for it (Batch.Placed), and its Data is then empty: Bytes
// gives nothing for lz4/zstd pages; Class, Fill, Size and Sum are set.
type Placer interface {
	// Place writes the object of page i of the part, its checksum Sum[i]
	// (4 bytes, little-endian) followed by its Size[i] stored bytes, to
	// dst[i], for every i with dst[i] non-nil; dst[i] has exactly that
	// length. It returns once every byte is there. An error means the
	// backend failed: it is wrapped in a PlaceError.
	Place(dst [][]byte) error
}

// ObjectHeader is the size of the checksum in front of a placed object.
const ObjectHeader = 4

// PlaceError is a backend's failure while placing a part: the batch is
// the backend's to redo elsewhere, not the caller's to report.
type PlaceError struct{ Err error }

func (e *PlaceError) Error() string { return "placing compressed pages: " + e.Err.Error() }
func (e *PlaceError) Unwrap() error { return e.Err }

// IsPlaceError tells whether err, from a deliver function, is a backend's
// failure to place a part rather than the caller's own.
func IsPlaceError(err error) bool {
	var pe *PlaceError
	return errors.As(err, &pe)
}
