package scheduler

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors of package scheduler. Callers test them with errors.Is; errors returned by
// this package wrap them with %w and context (class, task name, option field).
var (
	// ErrClosed is returned by Submit once Close has been called. The task is not queued and
	// no Handle is returned.
	ErrClosed = errors.New("scheduler: closed")

	// ErrCancelled is the error of a task that never ran: Handle.Cancel removed it from its
	// queue, or Close dropped it. It wraps context.Canceled, so both
	// errors.Is(err, ErrCancelled) and errors.Is(err, context.Canceled) hold. A task that
	// was already running when cancelled completes with whatever its function returns.
	ErrCancelled = fmt.Errorf("scheduler: task cancelled before it ran: %w", context.Canceled)

	// ErrInvalidTask is returned by Submit for a Class >= NumClasses or a nil function.
	ErrInvalidTask = errors.New("scheduler: invalid task")

	// ErrInvalidOptions is returned by Options.Validate and New; the wrapped message names
	// the bad field.
	ErrInvalidOptions = errors.New("scheduler: invalid options")

	// ErrPanic is wrapped by the *PanicError of a task whose function panicked.
	ErrPanic = errors.New("scheduler: task panicked")

	// ErrGoexit is the error of a task whose function called runtime.Goexit (for example
	// testing.T.FailNow on a task goroutine). The worker goroutine that ran it ends, and the
	// scheduler starts a replacement so that the worker count stays Options.Workers.
	ErrGoexit = errors.New("scheduler: task called runtime.Goexit")
)

// PanicError is the error of a task whose function panicked. The panic is recovered on the
// worker goroutine — it does not crash the process — and the task completes with this error
// (counted as failed in Stats). errors.Is(err, ErrPanic) holds; when the panic value is itself
// an error, errors.Is/As also see through to it.
type PanicError struct {
	// Class and Name identify the task, as passed to Submit.
	Class Class
	Name  string
	// Value is the value passed to panic (a *runtime.PanicNilError for panic(nil)).
	Value any
	// Stack is the panicking goroutine's stack (runtime/debug.Stack) taken inside the
	// recovery, so it includes the frames that panicked.
	Stack []byte
}

// Error returns the class, the task name, the panic value and the stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("scheduler: task %s/%q panicked: %v\n\n%s", e.Class, e.Name, e.Value, e.Stack)
}

// Unwrap returns ErrPanic and, when the panic value is an error, that error.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPanic, err}
	}
	return []error{ErrPanic}
}
