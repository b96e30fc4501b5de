"""The tools above the services: the stack launcher, the pipeline and its wiring, the service
registry, the demo, the dashboards checker and the configuration reference. Services never
import this package; it imports them (their settings) and runs them as processes."""
