/* The D-Bus API: org.npud.Manager1 on the system bus (or on $DBUS_SYSTEM_BUS_ADDRESS), served
 * from the daemon's libevent loop. Only started when the configuration asks for it
 * ("dbus": true or --dbus); an unreachable bus is a warning, not an error.
 * docs/dbus.md is the reference; docs/dbus/ holds the interface files.
 *
 *   /org/npud/Manager1                 org.npud.Manager1
 *     properties  Version s, Devices ao, SessionCount u (emits change)
 *     methods     Drain(u device), Undrain(u), Reset(u), SetTenantQuota(s tenant,
 *                 i device (-1 = total), t bytes), KillSession(t id), Reload(),
 *                 InjectFault(u device, s kind, d value), ClearFault(u device)
 *     signals     DeviceHealthChanged(u device, s health), SessionOpened(t id, u pid, u uid),
 *                 SessionClosed(t id)
 *   /org/npud/Manager1/device/N        org.npud.Device1
 *     properties  Name s, Profile s, Health s ("ok"/"failed"), MemoryTotal t, MemoryUsed t,
 *                 Utilization a{sd} (percent busy per engine: cube, vector, aicpu, dma),
 *                 Draining b; Health, Draining and MemoryUsed emit PropertiesChanged
 *                 (MemoryUsed at most once a second); identity and telemetry; Faults a{sd}
 *   /org/npud/Manager1/tenant/NAME     org.npud.Tenant1 (Name, Class, Weight, Sessions,
 *                                      MemoryUsed, MemoryQuotaTotal, MemoryQuotaByDevice;
 *                                      Class, Weight and the quotas emit PropertiesChanged)
 *   /org/npud/Manager1/session/ID      org.npud.Session1 (Id, Pid, Uid, Client, Tenant)
 *   /org/npud/Manager1 is an ObjectManager; sessions and tenants (run-time tenant calls,
 *   reloads) come and go with InterfacesAdded and InterfacesRemoved. Errors are org.npud.Error.* (docs/dbus.md). A lost or missing bus is
 *   retried on a timer (1 s, doubling to 16 s) and everything registered again.
 *
 * Every method requires root or the admin group, checked in the handler from the caller's
 * bus credentials (the policy file systemd/org.npud.Manager1.conf restricts it too). */
#ifndef NPUD_BUS_H
#define NPUD_BUS_H

struct npud;

/* Connect, register the objects, own the name and install the observer hooks, when
 * d->config.dbus is set. Returns 1 when the API is up, 0 when it is off or the bus could not
 * be used (a warning says why); npud runs on either way. */
int bus_start(struct npud *d);
/* Remove the hooks, flush and close the connection (before the sessions are closed at
 * shutdown). Safe when bus_start did nothing. */
void bus_stop(struct npud *d);

#endif
