// Package cold is the cold tier, mechanism and policy, above the page
// store: the idle clock, recompression of idle and huge pages with a
// stronger codec (recompress.go), and the levels below the store's RAM,
// today one, a backing file (file.go): writeback under pressure, ahead
// of PUTs and on demand (writeback.go), checkpoints, persistence across
// restarts and compaction of the file (persist.go).
//
// The store (pagecache) knows nothing of files. It offers a small API to
// move pages (pagecache/move.go: Pick, DrainColdest, CopyObjects,
// Relocate, Records, Restore) and calls back through one interface,
// pagecache.Tier, which this package registers (Store.SetTier): MakeRoom
// when a PUT finds no room, Read for a page off RAM, Hold while such a
// read runs without the store's lock, Forget when a page off RAM is
// replaced or deleted. A PUT with room never leaves the store.
//
// The remote store (a Valkey cluster) is to be one more level, below the
// file, behind the same interface: the tier splits the place numbers
// (pagecache.Loc) between its levels, say the top bit for remote, and
// routes Read, Hold and Forget by it; moving a page from the file to
// the remote store is a Relocate from one place off RAM to another, as
// file compaction already does, and the store frees the old place
// through Forget. Nothing of the store changes for it.
package cold
