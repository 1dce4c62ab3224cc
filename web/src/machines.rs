//! The lab's machines: the Machines panel (each machine's devices, load, runs and
//! last-seen time) and the launch form's machine choice, both from `GET /api/machines`.

use crate::format;
use hotlab_protocol::MachineInfo;
use leptos::prelude::*;
use std::time::Duration;

/// How often the list is asked for again.
const REFRESH: Duration = Duration::from_secs(3);

/// The machines, asked for now and every few seconds while the caller's view lives.
fn machines_signal() -> (RwSignal<Vec<MachineInfo>>, RwSignal<Option<String>>) {
    let (machines, error) = (RwSignal::new(Vec::<MachineInfo>::new()), RwSignal::new(None::<String>));
    let refresh = move || {
        leptos::task::spawn_local(async move {
            let answer = crate::api::get::<Vec<MachineInfo>>("/api/machines").await;
            // The page may be gone by the time the answer comes.
            match answer {
                Ok(list) => {
                    if machines.try_with_untracked(|m| m != &list) == Some(true) {
                        let _ = machines.try_set(list);
                    }
                    let _ = error.try_set(None);
                }
                Err(e) => {
                    let _ = error.try_set(Some(e.message));
                }
            }
        })
    };
    refresh();
    if let Ok(handle) = set_interval_with_handle(refresh, REFRESH) {
        on_cleanup(move || handle.clear());
    }
    (machines, error)
}

/// "12 s ago" from milliseconds since the epoch.
pub fn ago(then_ms: u64, now_ms: f64) -> String {
    let s = ((now_ms - then_ms as f64) / 1000.0).max(0.0);
    match s {
        s if s < 60.0 => format!("{s:.0} s ago"),
        s if s < 3600.0 => format!("{:.0} min ago", s / 60.0),
        s => format!("{:.1} h ago", s / 3600.0),
    }
}

/// A machine's devices in a line: `cpu, cuda:0 (NVIDIA H100, 79.6 GiB)`.
pub fn devices_line(m: &MachineInfo) -> String {
    if m.ray {
        return "placed by Ray: each run a job on a node with what it asks for".into();
    }
    let Some(system) = &m.system else { return "not known yet (its worker has not come back)".into() };
    system
        .devices
        .iter()
        .map(|d| match (d.id.as_str(), d.memory_bytes) {
            ("cpu", _) => format!("cpu ({} cores)", system.cpu_cores),
            (id, Some(b)) => format!("{id} ({}, {})", d.name, format::bytes(b as f64)),
            (id, None) => format!("{id} ({})", d.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A machine's load in a line.
pub fn load_line(m: &MachineInfo) -> String {
    let mut parts = vec![match m.ray {
        true => format!("{} runs", m.runs),
        false => format!("{} of {} runs", m.runs, m.max_runs),
    }];
    if m.queued > 0 {
        parts.push(format!("{} queued", m.queued));
    }
    if let Some(load) = &m.load {
        if let Some(b) = load.gpu_memory_used_bytes {
            parts.push(format!("GPU memory {}", format::bytes(b as f64)));
        }
        if let Some(u) = load.gpu_utilization {
            parts.push(format!("GPU {}", format::percent(u * 100.0)));
        }
    }
    parts.join(" · ")
}

#[component]
pub fn MachinesPanel() -> impl IntoView {
    let (machines, error) = machines_signal();
    view! {
        <section class="panel" data-testid="machines-panel">
            <h2>"Machines"</h2>
            <p class="error">{move || error.get().unwrap_or_default()}</p>
            <table class="machines">
                <thead><tr><th>"machine"</th><th>"devices"</th><th>"load"</th><th>"seen"</th></tr></thead>
                <tbody>
                    {move || {
                        let now = js_sys::Date::now();
                        machines.get().into_iter().map(|m| {
                            let state = match (m.local, m.ray, m.connected) {
                                (true, _, _) => "local",
                                (_, true, _) => "ray",
                                (_, _, true) => "connected",
                                _ => "away",
                            };
                            let seen = match (m.local, m.last_seen_ms) {
                                (true, _) => "this server".to_string(),
                                (false, Some(t)) => ago(t, now),
                                (false, None) => "–".into(),
                            };
                            let version = m.system.as_ref().map(|s| format!("hotlab {} · libtorch {}", s.version, s.torch_version));
                            view! {
                                <tr data-testid="machine-row" data-machine=m.name.clone()>
                                    <td><strong>{m.name.clone()}</strong>" "
                                        <span class=format!("status {state}") data-testid="machine-state">{state}</span>
                                        <div class="muted">{version.unwrap_or_default()}</div></td>
                                    <td data-testid="machine-devices">{devices_line(&m)}</td>
                                    <td data-testid="machine-load">{load_line(&m)}</td>
                                    <td>{seen}</td>
                                </tr>
                            }
                        }).collect_view()
                    }}
                </tbody>
            </table>
            {move || machines.with(Vec::is_empty).then(|| view! {
                <p class="muted">"No machine yet: start "<code>"hotlab worker --lab URL --worker-token T"</code>" on one."</p>
            })}
        </section>
    }
}

/// The launch form's machine choice: "" is any free machine with the device.
#[component]
pub fn MachineSelect(machine: RwSignal<String>, error: Signal<Option<String>>) -> impl IntoView {
    let (machines, _) = machines_signal();
    view! {
        <label class="knob" class:invalid=move || error.get().is_some()
            title="Where the run trains: a machine of the lab, or any free one with the device the spec asks for">
            <span class="name">"machine"</span>
            <select name="machine" data-testid="machine-select" prop:value=move || machine.get()
                on:change=move |ev| machine.set(event_target_value(&ev))>
                <option value="">"any free machine"</option>
                {move || machines.get().into_iter().map(|m| {
                    let label = match m.connected { true => m.name.clone(), false => format!("{} (away)", m.name) };
                    let name = m.name.clone();
                    view! { <option value=m.name.clone() selected=move || machine.get() == name>{label}</option> }
                }).collect_view()}
            </select>
            <span class="help">"where it trains; any: a free machine with the device"</span>
            <span class="field-error" data-testid="error-machine">{move || error.get().unwrap_or_default()}</span>
        </label>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_protocol::system::{DeviceInfo, SystemInfo};
    use hotlab_protocol::Load;

    #[test]
    fn a_machine_reads_in_a_line() {
        let system = SystemInfo {
            name: "hotlab".into(),
            version: "0.1.0".into(),
            torch_version: "2.11.0".into(),
            cuda_available: true,
            devices: vec![
                DeviceInfo { id: "cpu".into(), name: "Xeon".into(), memory_bytes: None },
                DeviceInfo { id: "cuda:0".into(), name: "H100".into(), memory_bytes: Some(80 << 30) },
            ],
            cpu_cores: 16,
            torch_threads: 16,
            store_bytes: None,
            store: None,
            scripts: None,
        };
        let mut m =
            MachineInfo { name: "box".into(), system: Some(system), max_runs: 2, runs: 1, ..Default::default() };
        assert_eq!(devices_line(&m), "cpu (16 cores), cuda:0 (H100, 80.0 GiB)");
        assert_eq!(load_line(&m), "1 of 2 runs");
        m.queued = 3;
        m.load = Some(Load { runs: 1, gpu_memory_used_bytes: Some(1 << 30), gpu_utilization: Some(0.5) });
        assert!(load_line(&m).eq("1 of 2 runs · 3 queued · GPU memory 1.0 GiB · GPU 50.0 %"), "{}", load_line(&m));
        m.system = None;
        assert!(devices_line(&m).contains("not known yet"));
        assert_eq!(ago(1_000, 13_000.0), "12 s ago");
        let ray = MachineInfo { name: "ray".into(), ray: true, max_runs: 10_000, runs: 3, ..Default::default() };
        assert_eq!(load_line(&ray), "3 runs");
        assert!(devices_line(&ray).contains("Ray"));
        assert_eq!(ago(0, 180_000.0), "3 min ago");
    }
}
