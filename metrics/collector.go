// Package metrics serves s4d's figures to Prometheus: the store, its pools,
// each engine's counters, request latency and the start-up calibration.
//
// It reads the daemon through Source and nothing else, at scrape time, so a
// scrape costs one STATS and nothing is counted twice; the daemon does not
// import Prometheus.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/latency"
	"github.com/s4d-project/s4d/routing"
)

// Source is what the collector reads; *daemon.Daemon is one.
type Source interface {
	// Stats is the STATS answer as uid sees it (0: every pool).
	Stats(uid uint32) *ipc.Stats
	RequestLatency() []latency.Op
	CalibratedRates() []routing.Rate
}

const ns = "s4d"

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
}

// The series, named by Prometheus's conventions: base units (bytes,
// seconds), _total for counters, no unit in a gauge of things counted.
var (
	storedPages     = desc("stored_pages", "Pages stored.")
	dataBytes       = desc("stored_data_bytes", "Uncompressed size of the pages stored.")
	comprBytes      = desc("compressed_bytes", "Compressed size of the pages stored.")
	memUsed         = desc("memory_used_bytes", "Memory held for compressed pages, index included.")
	memLimit        = desc("memory_limit_bytes", "The memory limit; absent when there is none.")
	memUsedMax      = desc("memory_used_max_bytes", "Most memory ever held for compressed pages.")
	metadataBytes   = desc("metadata_bytes", "Memory held by the index.")
	pagesByClass    = desc("stored_pages_by_class", "Pages stored that took no compressed bytes (zero, same) or were stored raw (huge).", "class")
	compacted       = desc("compacted_pages_total", "Pages moved by compaction.")
	failedReads     = desc("failed_reads_total", "GETs that failed.")
	failedWrites    = desc("failed_writes_total", "PUTs that failed.")
	invalidRequests = desc("invalid_requests_total", "Malformed or refused requests.")
	noSpace         = desc("no_space_pages_total", "Pages refused by the memory limit.")
	fallbacks       = desc("fallbacks_total", "Batches redone on another engine after one failed.")
	checksumErrors  = desc("checksum_errors_total", "Stored pages whose checksum did not match; never returned as data.")
	uptime          = desc("uptime_seconds", "Seconds since the daemon started.")
	refusedConns    = desc("connections_refused_total", "Connections refused at a connection limit (in all or per user).")
	busy            = desc("requests_busy_total", "Requests answered BUSY: the request memory budget was taken.")
	errorAnswers    = desc("error_answers_total", "Requests answered with an error, by the answer's code.", "code")
	requestBytes    = desc("request_memory_bytes", "Memory reserved now by requests and replies in flight.")
	requestBudget   = desc("request_memory_budget_bytes", "The budget of memory for requests and replies in flight.")
	info            = desc("build_info", "Always 1; the labels say which s4d this is.", "version", "commit", "codec", "page_size")

	poolPages = desc("pool_stored_pages", "Pages stored in a pool.", "pool", "uid")
	poolData  = desc("pool_stored_data_bytes", "Uncompressed size of a pool's pages.", "pool", "uid")
	poolCompr = desc("pool_compressed_bytes", "Compressed size of a pool's pages.", "pool", "uid")
	poolClass = desc("pool_stored_pages_by_class", "A pool's zero, same-filled and raw (huge) pages.", "pool", "uid", "class")

	// An engine of several devices (GPUs) is one series per device: device
	// is its number, "" for an engine of one.
	engineState    = desc("engine_state", "1 for the engine's state: ok, unavailable or failed.", "engine", "device", "state")
	engineInUse    = desc("engine_in_use", "1 for the engine new batches go to first.", "engine", "device")
	engineInFlight = desc("engine_batches_in_flight", "Batches an engine (device) is working on now.", "engine", "device")
	engineBatches  = desc("engine_batches_total", "Batches an engine took.", "engine", "device", "codec", "direction")
	enginePages    = desc("engine_pages_total", "Pages an engine compressed or decompressed.", "engine", "device", "codec", "direction")
	engineIn       = desc("engine_input_bytes_total", "Bytes an engine read: pages to compress, or stored bytes to decode.", "engine", "device", "codec", "direction")
	engineOut      = desc("engine_output_bytes_total", "Bytes an engine wrote: compressed bytes, or decoded pages.", "engine", "device", "codec", "direction")
	engineErrors   = desc("engine_errors_total", "Batches that failed on an engine (each then went to the next one).", "engine", "device", "codec", "direction")

	requestSeconds = desc("request_duration_seconds", "Time from a request's arrival to its answer, by operation.", "op")
	calibration    = desc("calibration_rate_bytes_per_second", "Throughput measured at start-up per engine, direction and batch size; it routes batches.", "engine", "direction", "batch_pages")
)

var all = []*prometheus.Desc{storedPages, dataBytes, comprBytes, memUsed, memLimit, memUsedMax, metadataBytes,
	pagesByClass, compacted, failedReads, failedWrites, invalidRequests, noSpace, fallbacks, checksumErrors, uptime,
	refusedConns, busy, errorAnswers, requestBytes, requestBudget,
	info, poolPages, poolData, poolCompr, poolClass, engineState, engineInUse, engineInFlight, engineBatches, enginePages, engineIn,
	engineOut, engineErrors, requestSeconds, calibration}

// Collector is a prometheus.Collector over a Source.
type Collector struct {
	src     Source
	version string
	commit  string
}

// NewCollector reads src; version and commit label s4d_build_info.
func NewCollector(src Source, version, commit string) *Collector {
	return &Collector{src: src, version: version, commit: commit}
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range append(all, coldDescs...) { // cold.go; region.go and backing.go add to all
		ch <- d
	}
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats(0)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	m := st.Mem
	gauge(info, 1, c.version, c.commit, st.Codec, strconv.Itoa(st.PageSize))
	gauge(uptime, st.Uptime)
	gauge(storedPages, float64(m.Pages))
	gauge(dataBytes, float64(m.OrigDataSize))
	gauge(comprBytes, float64(m.ComprDataSize))
	gauge(memUsed, float64(m.MemUsedTotal))
	if m.MemLimit > 0 {
		gauge(memLimit, float64(m.MemLimit))
	}
	gauge(memUsedMax, float64(m.MemUsedMax))
	gauge(metadataBytes, float64(m.MetadataBytes))
	gauge(pagesByClass, float64(m.ZeroPages), "zero")
	gauge(pagesByClass, float64(m.SamePages), "same")
	gauge(pagesByClass, float64(m.HugePages), "huge")
	counter(compacted, m.PagesCompacted)
	io := st.IO
	counter(failedReads, io.FailedReads)
	counter(failedWrites, io.FailedWrites)
	counter(invalidRequests, io.InvalidIO)
	counter(noSpace, io.NoSpace)
	counter(fallbacks, io.Fallbacks)
	counter(checksumErrors, io.ChecksumErrors)
	counter(refusedConns, io.RefusedConnections)
	counter(busy, io.Busy)
	for code, n := range io.Answers {
		counter(errorAnswers, n, code)
	}
	gauge(requestBytes, float64(io.RequestBytes))
	gauge(requestBudget, float64(io.RequestBudget))
	hist := func(d *prometheus.Desc, h *ipc.Histogram, labels ...string) {
		if m := histogram(d, h, labels...); m != nil {
			ch <- m
		}
	}
	collectBacking(st.Backing, gauge, counter, func(d *prometheus.Desc, h *ipc.Histogram) { hist(d, h) }) // backing.go
	collectRegions(st.RegionTotals, gauge, counter, hist)                                                 // region.go
	collectRemote(st.Remote, gauge, counter, func(d *prometheus.Desc, h *ipc.Histogram) { hist(d, h) })   // remote.go

	for _, p := range st.Pools {
		uid := strconv.FormatUint(uint64(p.UID), 10)
		gauge(poolPages, float64(p.Pages), p.Name, uid)
		gauge(poolData, float64(p.OrigBytes), p.Name, uid)
		gauge(poolCompr, float64(p.StoredBytes), p.Name, uid)
		gauge(poolClass, float64(p.ZeroPages), p.Name, uid, "zero")
		gauge(poolClass, float64(p.SamePages), p.Name, uid, "same")
		gauge(poolClass, float64(p.HugePages), p.Name, uid, "huge")
	}

	for _, b := range st.Backends {
		// Every state is written, 0 or 1, so a change is a change of value
		// and not a series that vanishes.
		eng := b.Name
		if b.Device != "" {
			eng = b.Engine
		}
		for _, s := range []string{"ok", "unavailable", "failed"} {
			gauge(engineState, b2f(b.State == s), eng, b.Device, s)
		}
		gauge(engineInUse, b2f(b.InUse), eng, b.Device)
		gauge(engineInFlight, float64(b.InFlight), eng, b.Device)
		for _, k := range b.Counters {
			l := []string{eng, b.Device, k.Codec, k.Direction}
			counter(engineBatches, k.Batches, l...)
			counter(enginePages, k.Pages, l...)
			counter(engineIn, k.BytesIn, l...)
			counter(engineOut, k.BytesOut, l...)
			counter(engineErrors, k.Errors, l...)
		}
	}

	for _, op := range c.src.RequestLatency() {
		buckets := make(map[float64]uint64, len(latency.Bounds))
		var n uint64
		for i, b := range latency.Bounds {
			n += op.Counts[i]
			buckets[b] = n
		}
		n += op.Counts[len(op.Counts)-1]
		ch <- prometheus.MustNewConstHistogram(requestSeconds, n, op.Sum.Seconds(), buckets, op.Op)
	}

	collectCold(st, ch) // cold.go
	for _, r := range c.src.CalibratedRates() {
		gauge(calibration, r.BytesPerS, r.Backend, r.Direction, strconv.Itoa(r.Pages))
	}
}

// histogram is h as Prometheus takes it (cumulative buckets); nil when
// there is none or it is malformed.
func histogram(d *prometheus.Desc, h *ipc.Histogram, labels ...string) prometheus.Metric {
	if h == nil || len(h.Counts) != len(h.Bounds)+1 {
		return nil
	}
	buckets := make(map[float64]uint64, len(h.Bounds))
	var n uint64
	for i, b := range h.Bounds {
		n += h.Counts[i]
		buckets[b] = n
	}
	n += h.Counts[len(h.Bounds)]
	m, err := prometheus.NewConstHistogram(d, n, h.Sum, buckets, labels...)
	if err != nil {
		return nil
	}
	return m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// scrapeTimeout bounds one scrape: STATS walks every pool under the
// store's locks and must not hold a scraper forever.
const scrapeTimeout = 10 * time.Second
