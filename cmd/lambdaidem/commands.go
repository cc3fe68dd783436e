package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// openStatuses are the statuses in the sparse index, in listing order.
var openStatuses = []idemstore.Status{idemstore.StatusInProgress, idemstore.StatusFailed, idemstore.StatusDeadLettered}

// ---- get ----

func getCmd() *command {
	return &command{
		name: "get", args: "KEY",
		summary: "Show the record of KEY: status, lease (valid or expired), attempts, times, last error,\ndead-letter details. Reads with a strongly consistent read.",
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			_, _, r, now, err := a.record(ctx, c, args)
			if err != nil {
				return err
			}
			if c.json {
				a.writeJSON(toJSON(r, now))
				return nil
			}
			writeRecord(a.stdout, c.table, r, now)
			return nil
		},
	}
}

// ---- list ----

type listFlags struct {
	statuses     statusList
	stuck        bool
	failed       bool
	deadLettered bool
	olderThan    time.Duration
	limit        int
	pageSize     int
	quiet        bool
}

// statusList collects -status values (repeatable, or comma-separated).
type statusList []idemstore.Status

func (s *statusList) String() string { return fmt.Sprint([]idemstore.Status(*s)) }

func (s *statusList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		st := idemstore.Status(strings.ToUpper(strings.TrimSpace(part)))
		switch st {
		case idemstore.StatusInProgress, idemstore.StatusFailed, idemstore.StatusDeadLettered:
			*s = append(*s, st)
		case idemstore.StatusCompleted:
			return errors.New("COMPLETED records are not in the open index; use \"get KEY\" for one, \"stats -all\" to count them")
		default:
			return fmt.Errorf("unknown status %q (IN_PROGRESS, FAILED or DEAD_LETTERED)", part)
		}
	}
	return nil
}

// listJSON is list's -json output.
type listJSON struct {
	Table     string       `json:"table"`
	Namespace string       `json:"namespace,omitempty"`
	Records   []recordJSON `json:"records"`
	// More is true when -limit cut the listing short.
	More bool `json:"more"`
}

func listCmd() *command {
	lf := &listFlags{}
	return &command{
		name: "list",
		summary: `List unfinished records, least recently updated first. Reads the sparse index
(one Query per status), never the whole table; COMPLETED records are not listed.
Without filters it lists IN_PROGRESS, FAILED and DEAD_LETTERED records. The index
lags the table by a moment: "get KEY" before acting on a row.`,
		flags: func(fs *flag.FlagSet) {
			fs.Var(&lf.statuses, "status", "only these `statuses`: IN_PROGRESS, FAILED, DEAD_LETTERED (repeatable or comma-separated)")
			fs.BoolVar(&lf.stuck, "stuck", false, "IN_PROGRESS records whose lease has expired (a crashed or timed-out holder)")
			fs.BoolVar(&lf.failed, "failed", false, "FAILED records (same as -status FAILED)")
			fs.BoolVar(&lf.deadLettered, "dead-lettered", false, "DEAD_LETTERED records (same as -status DEAD_LETTERED)")
			fs.DurationVar(&lf.olderThan, "older-than", 0, "only records last updated longer ago than this `duration`, e.g. 1h")
			fs.IntVar(&lf.limit, "limit", 100, "print at most `n` records (0: all)")
			fs.IntVar(&lf.pageSize, "page-size", 100, "index entries per Query `page`")
			fs.BoolVar(&lf.quiet, "quiet", false, "no progress lines on stderr")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			return a.list(ctx, c, lf, args)
		},
	}
}

func (a *app) list(ctx context.Context, c *common, lf *listFlags, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	if lf.limit < 0 || lf.olderThan < 0 || lf.pageSize < 1 {
		return usagef("-limit and -older-than must not be negative, -page-size must be positive")
	}
	want := map[idemstore.Status]bool{}
	for _, s := range lf.statuses {
		want[s] = true
	}
	if lf.failed {
		want[idemstore.StatusFailed] = true
	}
	if lf.deadLettered {
		want[idemstore.StatusDeadLettered] = true
	}
	if lf.stuck {
		want[idemstore.StatusInProgress] = true
	}
	if len(want) == 0 {
		for _, s := range openStatuses {
			want[s] = true
		}
	}

	st, err := a.admin(ctx, c)
	if err != nil {
		return err
	}
	now := a.now()
	var before time.Time
	if lf.olderThan > 0 {
		before = now.Add(-lf.olderThan)
	}
	// Each status streams oldest first; the first n of each are enough to
	// find the oldest n overall.
	var rows []idemstore.Record
	more := false
	for _, status := range openStatuses {
		if !want[status] {
			continue
		}
		n := 0
		req := idemstore.ListOpenRequest{Status: status, Namespace: c.namespace, UpdatedBefore: before, Now: now, PageSize: lf.pageSize}
		if !lf.quiet {
			req.Progress = func(p idemstore.PageProgress) {
				if p.Pages > 1 {
					a.progressf("list: %s: %d pages read, %d index entries", status, p.Pages, p.Read)
				}
			}
		}
		for r, err := range st.ListOpen(ctx, req) {
			if err != nil {
				return fmt.Errorf("list %s records of %s: %w", status, c.place(), err)
			}
			if status == idemstore.StatusInProgress && lf.stuck && !r.LeaseUntil.Before(now) {
				continue
			}
			if lf.limit > 0 && n == lf.limit {
				more = true
				break
			}
			rows = append(rows, r)
			n++
		}
	}
	slices.SortStableFunc(rows, func(x, y idemstore.Record) int { return x.UpdatedAt.Compare(y.UpdatedAt) })
	if lf.limit > 0 && len(rows) > lf.limit {
		rows, more = rows[:lf.limit], true
	}

	if c.json {
		out := listJSON{Table: c.table, Namespace: c.namespace, Records: []recordJSON{}, More: more}
		for _, r := range rows {
			out.Records = append(out.Records, toJSON(r, now))
		}
		a.writeJSON(out)
	} else {
		a.writeTable(c, rows, now)
	}
	if more && !lf.quiet {
		a.progressf("list: stopped at -limit %d; more records match (-limit 0 lists all)", lf.limit)
	}
	return nil
}

func (a *app) writeTable(c *common, rows []idemstore.Record, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintf(a.stdout, "no matching records in %s\n", safe(c.place()))
		return
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	allNS := c.namespace == ""
	header := "STATUS\t"
	if allNS {
		header += "NAMESPACE\t"
	}
	fmt.Fprintln(tw, header+"KEY\tATTEMPTS\tUPDATED\tLEASE\tDETAIL")
	for _, r := range rows {
		lease := "-"
		switch leaseState(r, now) {
		case leaseValid:
			lease = "valid, ends " + relative(r.LeaseUntil, now)
		case leaseExpired:
			lease = "EXPIRED " + relative(r.LeaseUntil, now)
		}
		row := safe(string(r.Status)) + "\t"
		if allNS {
			row += safe(r.Namespace) + "\t"
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%s\t%s\t%s\n", row, safe(r.Key), r.Attempts, when(r.UpdatedAt, now), lease, safe(orDash(listDetail(r))))
	}
	_ = tw.Flush()
}

// listDetail is list's DETAIL column: the last error's first line, after
// the dead-letter reason unless the error already starts with it (a
// poison error reads "poison: ...").
//
// An abandoned record's detail starts with "abandoned", and one whose
// outcome is unknown says that it awaits a decision.
func listDetail(r idemstore.Record) string {
	detail := oneLine(r.LastError, 60)
	reason := string(r.DeadLetterReason)
	switch {
	case r.Abandoned():
		return "abandoned: " + oneLine(r.ResolutionNote, 60)
	case r.Uncertain():
		reason += " (awaiting a decision)"
	}
	if r.Status != idemstore.StatusDeadLettered || reason == "" || strings.HasPrefix(detail, reason+":") {
		return detail
	}
	return strings.TrimSuffix(reason+": "+detail, ": ")
}

// storedForm turns a KEY argument into the key as stored: a hashed form
// as list shows it ("sha256:" and 64 hex digits) is used as typed; any
// other key goes through idemstore.StoredKey, so the original of a long
// key finds its record too.
func storedForm(key string) string {
	if h, ok := strings.CutPrefix(key, idemstore.HashedKeyPrefix); ok && len(h) == 64 && strings.Trim(h, "0123456789abcdef") == "" {
		return key
	}
	return idemstore.StoredKey(key)
}

// ---- release ----

type releaseJSON struct {
	Released bool `json:"released"`
	Forced   bool `json:"forced"`
	// Revoked is true when -force revoked a live lease: the record stays
	// IN_PROGRESS until ClaimableAt, when the next delivery takes it over.
	Revoked     bool       `json:"revoked"`
	ClaimableAt string     `json:"claimable_at,omitempty"`
	Record      recordJSON `json:"record"`
}

func releaseCmd() *command {
	var force bool
	var note string
	var grace time.Duration
	return &command{
		name: "release", args: "KEY",
		summary: `End the lease of an IN_PROGRESS record. The write is conditioned on the lease
token just read, so a claim made in between is never undone.

A lease that has run out (its holder crashed or timed out; -grace past its end)
is released: the record becomes FAILED, keeping its attempt count, and the next
delivery of its message claims it as the next attempt (which runs if the
function's max attempts allow, else dead-letters it as max_attempts). Without
the release that delivery would take the lease over all the same; with
WithAtMostOnce it would dead-letter the key as outcome_unknown instead of
running it, so a release is how an operator says "run it again".

A lease that is still live is refused (exit 4), or with -force revoked: the
holder can no longer record an outcome or extend its lease (a refused
heartbeat stops its handler), and the key stays IN_PROGRESS until the lease
has run out, when the next delivery takes it over. Never two handlers at once.`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&force, "force", false, "revoke a lease that is still live (its holder can then record nothing; the key is taken over once the lease has run out)")
			fs.StringVar(&note, "note", idemstore.DefaultReleaseNote, "`text` stored as the record's last error")
			fs.DurationVar(&grace, "grace", idemstore.DefaultGrace, "the function's grace (WithGrace): how long past its end a lease counts as live")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			key, st, r, now, err := a.record(ctx, c, args)
			if err != nil {
				return err
			}
			if r.Status != idemstore.StatusInProgress {
				return refusef("%s is %s, not IN_PROGRESS: there is no lease to release (\"forget\" makes a key new again)", c.where(key), r.Status)
			}
			live := idemstore.LeaseLive(r, now, grace)
			if live && !force {
				return refusef("the lease on %s, held by message %s, runs until %s and counts as live for the %s grace after that: its holder may still be running. Wait, or use -force to revoke it",
					c.where(key), safe(orDash(r.MessageID)), when(r.LeaseUntil, now), grace)
			}
			out, err := st.Release(ctx, idemstore.ReleaseRequest{Namespace: c.namespace, Key: key, Token: r.LeaseToken, Now: now, Grace: grace, Force: force, Note: note})
			if err != nil {
				return fmt.Errorf("release %s: %w", c.where(key), err)
			}
			revoked := out.Status == idemstore.StatusInProgress
			if c.json {
				j := releaseJSON{Released: true, Forced: force, Revoked: revoked, Record: toJSON(out, now)}
				if revoked {
					j.ClaimableAt = stamp(out.LeaseUntil.Add(grace))
				}
				a.writeJSON(j)
				return nil
			}
			if revoked {
				fmt.Fprintf(a.stdout, "revoked the lease on %s, held by message %s: its holder can no longer record an outcome or extend the lease (a refused heartbeat stops its handler). The key stays IN_PROGRESS until %s (the lease's end plus the %s grace); then %s takes it over as attempt %d.\n",
					c.where(key), safe(orDash(out.MessageID)), when(out.LeaseUntil.Add(grace), now), grace, nextDelivery(out), out.Attempts+1)
			} else {
				fmt.Fprintf(a.stdout, "released %s: it is FAILED now, after %s; %s claims it as attempt %d, which runs if the function's max attempts allow, else dead-letters it as max_attempts.\n",
					c.where(key), attempts(out.Attempts), nextDelivery(out), out.Attempts+1)
			}
			if r.DeadLetterReason != "" {
				fmt.Fprintf(a.stdout, "note: its holder had begun dead-lettering it (%s) when it stopped: a copy may be in the dead-letter queue already; redrive leaves that copy there while the record is not DEAD_LETTERED by it.\n", safe(string(r.DeadLetterReason)))
			}
			return nil
		},
	}
}

// nextDelivery names what runs a record's key next: the message's next
// delivery for an SQS record, the next request for a Wrap record (which
// has no message ID).
func nextDelivery(r idemstore.Record) string {
	if r.MessageID == "" {
		return "the next request with this key"
	}
	return "the next delivery of message " + safe(r.MessageID) + " (SQS delivers it again once its visibility timeout ends)"
}

// ---- forget ----

type forgetJSON struct {
	Forgotten bool `json:"forgotten"`
	// Revoked is true when -force revoked a live lease: the record stays
	// until ForgottenAt.
	Revoked     bool       `json:"revoked"`
	ForgottenAt string     `json:"forgotten_at"`
	Record      recordJSON `json:"record"`
}

func forgetCmd() *command {
	var yes, force, abandon bool
	var grace time.Duration
	return &command{
		name: "forget", args: "KEY",
		summary: `Delete the record of KEY, so that the next message (or request) with this key
runs the handler again, as the first attempt of a new record: a completed key
is no longer a duplicate, a failed or stuck one starts its attempts over. It
brings no message back: a completed or dead-lettered message was acknowledged,
so only a new one with this key runs it. Warm function instances with
WithCache may still skip a completed key until their cache entry ends. Asks for
confirmation on a terminal; elsewhere -yes is required.

A DEAD_LETTERED record is refused (exit 4) unless -abandon-copy: redrive sends
its dead-letter copy back only after resetting this very record, so
forgetting it would leave the copy in the DLQ for good. To run it again, use
"lambdaidem redrive" instead.

A record under a live lease is refused (exit 4), or with -force its lease is
revoked (its holder can record nothing from then on) and the record is
forgotten when that lease has run out, never while its holder may still run.`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
			fs.BoolVar(&force, "force", false, "revoke a live lease and forget the record when that lease has run out")
			fs.BoolVar(&abandon, "abandon-copy", false, "forget a DEAD_LETTERED record although redrive can then never send its dead-letter copy back")
			fs.DurationVar(&grace, "grace", idemstore.DefaultGrace, "the function's grace (WithGrace): how long past its end a lease counts as live")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			key, st, r, now, err := a.record(ctx, c, args)
			if err != nil {
				return err
			}
			live := idemstore.LeaseLive(r, now, grace)
			switch {
			case r.Status == idemstore.StatusDeadLettered && !abandon:
				return refusef("%s is DEAD_LETTERED (%s): its message waits in the dead-letter queue as copy %s, and redrive sends that copy back only after resetting this record, which shows the copy dead-lettered it. Forgetting the record would leave the copy there for good, and no other message with this key is on its way (message %s was acknowledged). To run it again: lambdaidem redrive -dlq DLQ_URL -source QUEUE_ARN. To forget the key anyway (the producer will send it again, or you will deal with the copy by hand), pass -abandon-copy",
					c.where(key), safe(orDash(string(r.DeadLetterReason))), safe(orDash(r.DeadLetterMessageID)), safe(orDash(r.DeadLetteredMessageID)))
			case live && !force:
				return refusef("the lease on %s, held by message %s, runs until %s and counts as live for the %s grace after that: its holder may still be running. Wait, or use -force to revoke it and forget the record once it has run out",
					c.where(key), safe(orDash(r.MessageID)), when(r.LeaseUntil, now), grace)
			}
			if !yes {
				q := fmt.Sprintf("Forget %s (%s, %s)?", c.where(key), r.Status, attempts(r.Attempts))
				if live {
					q = fmt.Sprintf("Revoke the live lease on %s and forget it at %s?", c.where(key), stamp(r.LeaseUntil.Add(grace)))
				}
				ok, err := a.confirm(q)
				if err != nil {
					return err
				}
				if !ok {
					return refusef("not confirmed: %s kept", c.where(key))
				}
			}
			res, err := st.Forget(ctx, idemstore.ForgetRequest{Namespace: c.namespace, Key: key, Now: now, Grace: grace, Force: force, AbandonCopy: abandon})
			if err != nil {
				return fmt.Errorf("forget %s: %w", c.where(key), err)
			}
			if c.json {
				a.writeJSON(forgetJSON{Forgotten: true, Revoked: res.Revoked, ForgottenAt: stamp(res.ForgottenAt), Record: toJSON(res.Record, now)})
				return nil
			}
			fmt.Fprintln(a.stdout, describeForget(c.where(key), res, grace, now))
			return nil
		},
	}
}

// describeForget says what a forget did and what runs the key next.
func describeForget(where string, res idemstore.ForgetResult, grace time.Duration, now time.Time) string {
	r := res.Record
	fresh := "runs the handler as attempt 1 of a new record"
	if res.Revoked {
		return fmt.Sprintf("revoked the lease on %s, held by message %s: its holder can no longer record an outcome or extend the lease (a refused heartbeat stops its handler). The record is forgotten at %s (the lease's end plus the %s grace); after that %s %s.",
			where, safe(orDash(r.MessageID)), when(res.ForgottenAt, now), grace, nextDelivery(r), fresh)
	}
	was := fmt.Sprintf("forgot %s (was %s after %s)", where, r.Status, attempts(r.Attempts))
	switch {
	case r.MessageID == "":
		return fmt.Sprintf("%s: the next request with this key %s.", was, fresh)
	case r.Status == idemstore.StatusDeadLettered:
		return fmt.Sprintf("%s: its copy %s stays in the dead-letter queue, and redrive leaves it there from now on (no record shows it was dead-lettered): delete it, or send its body again by hand. The next message with this key %s; none is on its way (message %s was acknowledged).",
			was, safe(orDash(r.DeadLetterMessageID)), fresh, safe(orDash(r.DeadLetteredMessageID)))
	case r.Status == idemstore.StatusCompleted:
		return fmt.Sprintf("%s: the next message with this key %s; message %s is not delivered again (it was acknowledged). Function instances with WithCache may skip the key until their cache entry ends.",
			was, fresh, safe(r.MessageID))
	}
	return fmt.Sprintf("%s: %s %s.", was, nextDelivery(r), fresh)
}

// ---- stats ----

type statsJSON struct {
	Table     string `json:"table"`
	Namespace string `json:"namespace,omitempty"`
	// Counts maps each status to its count; COMPLETED is null unless -all.
	Counts map[idemstore.Status]*int `json:"counts"`
	// Stuck counts IN_PROGRESS records whose lease has expired.
	Stuck int `json:"stuck"`
	// Uncertain counts DEAD_LETTERED records whose outcome is unknown and
	// awaits an operator's decision ("resolve"); Abandoned those an
	// operator abandoned.
	Uncertain int `json:"awaiting_decision"`
	Abandoned int `json:"abandoned"`
}

func statsCmd() *command {
	var all, quiet bool
	return &command{
		name: "stats",
		summary: `Count records by status. IN_PROGRESS, FAILED and DEAD_LETTERED come from the
store's index of open records; COMPLETED records are in no index: on DynamoDB
counting them scans the whole table (read capacity in proportion to its size),
only with -all; the Redis store cannot count them.`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&all, "all", false, "also count COMPLETED records (DynamoDB: a scan of the whole table; refused on Redis)")
			fs.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected arguments %q", args)
			}
			st, err := a.admin(ctx, c)
			if err != nil {
				return err
			}
			now := a.now()
			out := statsJSON{Table: c.table, Namespace: c.namespace, Counts: map[idemstore.Status]*int{idemstore.StatusCompleted: nil}}
			count := func(req idemstore.CountRequest, always bool) (int, error) {
				req.Namespace, req.Now = c.namespace, now
				if !quiet {
					req.Progress = func(p idemstore.PageProgress) {
						if always || p.Pages > 1 {
							a.progressf("stats: %s: %d pages, %d items read, %d counted", req.Status, p.Pages, p.Read, p.Matched)
						}
					}
				}
				n, err := st.Count(ctx, req)
				if err != nil {
					return n, fmt.Errorf("count %s records of %s: %w", req.Status, c.place(), err)
				}
				return n, nil
			}
			for _, s := range openStatuses {
				n, err := count(idemstore.CountRequest{Status: s}, false)
				if err != nil {
					return err
				}
				out.Counts[s] = &n
			}
			if *out.Counts[idemstore.StatusInProgress] > 0 {
				if out.Stuck, err = count(idemstore.CountRequest{Status: idemstore.StatusInProgress, LeaseEndedBefore: now}, false); err != nil {
					return err
				}
			}
			if *out.Counts[idemstore.StatusDeadLettered] > 0 {
				// The decisions are no index's: the dead-lettered records
				// themselves say (a read of the open index, never a scan).
				for r, err := range st.ListOpen(ctx, idemstore.ListOpenRequest{Status: idemstore.StatusDeadLettered, Namespace: c.namespace, Now: now}) {
					if err != nil {
						return fmt.Errorf("list %s records of %s: %w", idemstore.StatusDeadLettered, c.place(), err)
					}
					switch {
					case r.Uncertain():
						out.Uncertain++
					case r.Abandoned():
						out.Abandoned++
					}
				}
			}
			if all {
				n, err := count(idemstore.CountRequest{Status: idemstore.StatusCompleted, AllowScan: true}, true)
				if err != nil {
					return err
				}
				out.Counts[idemstore.StatusCompleted] = &n
			}
			if c.json {
				a.writeJSON(out)
				return nil
			}
			a.writeStats(out, c.isRedis())
			return nil
		},
	}
}

func (a *app) writeStats(s statsJSON, redis bool) {
	label, notCounted := "table", "not counted: a scan of the whole table (-all)"
	if redis {
		label, notCounted = "store", "not counted: the Redis store keeps no index of them"
	}
	fmt.Fprintf(a.stdout, "%-10s %s\nnamespace  %s\n\n", label, safe(s.Table), cmp.Or(safe(s.Namespace), "(all)"))
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tRECORDS\t\t")
	for _, st := range append(slices.Clone(openStatuses), idemstore.StatusCompleted) {
		n := s.Counts[st]
		switch {
		case n == nil:
			fmt.Fprintf(tw, "%s\t-\t%s\t\n", st, notCounted)
		case st == idemstore.StatusInProgress && s.Stuck > 0:
			fmt.Fprintf(tw, "%s\t%d\t%d stuck (lease expired)\t\n", st, *n, s.Stuck)
		case st == idemstore.StatusDeadLettered && s.Uncertain+s.Abandoned > 0:
			var parts []string
			if s.Uncertain > 0 {
				parts = append(parts, fmt.Sprintf("%d outcome_unknown awaiting a decision (resolve)", s.Uncertain))
			}
			if s.Abandoned > 0 {
				parts = append(parts, fmt.Sprintf("%d abandoned", s.Abandoned))
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t\n", st, *n, strings.Join(parts, ", "))
		default:
			fmt.Fprintf(tw, "%s\t%d\t\t\n", st, *n)
		}
	}
	_ = tw.Flush()
	fmt.Fprint(a.stdout, trimLines(buf.String()))
}

// record reads the record of the command's KEY argument: the key, the
// store it was read from, the record and the time it was read at.
func (a *app) record(ctx context.Context, c *common, args []string) (string, idemstore.Admin, idemstore.Record, time.Time, error) {
	key, err := c.needKey(args)
	if err != nil {
		return "", nil, idemstore.Record{}, time.Time{}, err
	}
	if c.namespace == "" {
		c.namespace = defaultNamespace(a.env)
		a.progressf("no -namespace or LAMBDAIDEM_NAMESPACE: using %q, the library's default", c.namespace)
	}
	key = storedForm(key)
	st, err := a.admin(ctx, c)
	if err != nil {
		return "", nil, idemstore.Record{}, time.Time{}, err
	}
	now := a.now()
	r, err := st.Get(ctx, idemstore.GetRequest{Namespace: c.namespace, Key: key, Now: now})
	if errors.Is(err, idemstore.ErrNotFound) {
		return "", nil, idemstore.Record{}, time.Time{}, fmt.Errorf("no record for %s (never seen, forgotten, or expired): %w", c.where(key), idemstore.ErrNotFound)
	}
	if err != nil {
		return "", nil, idemstore.Record{}, time.Time{}, fmt.Errorf("read %s: %w", c.where(key), err)
	}
	return key, st, r, now, nil
}
