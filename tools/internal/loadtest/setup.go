package loadtest

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func setup(ctx context.Context, cl client.Client, spec Spec) error {
	for _, ns := range spec.Namespaces {
		for _, o := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}},
		} {
			if err := cl.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
				return err
			}
		}
	}
	if err := inParallel(len(spec.Sources), func(i int) error {
		if err := cl.Create(ctx, sourceObject(spec.Sources[i], 0)); err != nil {
			return fmt.Errorf("create %s: %w", spec.Sources[i].Key(), err)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, c := range spec.Configs {
		if err := cl.Create(ctx, configObject(c)); err != nil {
			return fmt.Errorf("create ReloaderConfig %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	return inParallel(len(spec.Workloads), func(i int) error {
		if err := cl.Create(ctx, workloadObject(spec.Workloads[i])); err != nil {
			return fmt.Errorf("create %s: %w", spec.Workloads[i].Key(), err)
		}
		return nil
	})
}

// inParallel runs fn(0..n-1) on 8 workers and returns the first error; after one, the
// workers stop taking more.
func inParallel(n int, fn func(i int) error) error {
	var (
		mu    sync.Mutex
		first error
		next  int
		wg    sync.WaitGroup
	)
	for range min(8, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func teardown(cl client.Client, spec Spec) {
	for _, ns := range spec.Namespaces {
		_ = cl.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
}
