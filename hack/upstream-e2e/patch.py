# Patches a copy of upstream's test/e2e/utils/helm.go so that DeployReloader, after installing
# the chart, also starts our binary locally, and UndeployReloader stops it. Specs are untouched.
import sys
p = sys.argv[1]
s = open(p).read()
old = '''		return fmt.Errorf("helm install failed: %s: %w", output, err)
	}

	return nil
}'''
assert old in s
s = s.replace(old, '''		return fmt.Errorf("helm install failed: %s: %w", output, err)
	}

	return startLocalReloader(opts.Namespace, opts.ReleaseName)
}''', 1)
old2 = '''		releaseName = DefaultHelmReleaseName
	}

	cmd := exec.Command("helm", "uninstall"'''
assert old2 in s
s = s.replace(old2, '''		releaseName = DefaultHelmReleaseName
	}
	stopLocalReloader()

	cmd := exec.Command("helm", "uninstall"''', 1)
old3 = '''	cmd := exec.Command("helm", args...)
	output, err := Run(cmd)
	if err != nil {
		return fmt.Errorf("helm install failed'''
assert old3 in s
s = s.replace(old3, '''	args = append(args, extraHelmSets()...)
''' + old3, 1)
open(p, 'w').write(s)
