use std::time::Instant;
use tch::{Device, Kind, Tensor};
fn time(name: &str, n: usize, mut f: impl FnMut()) {
    for _ in 0..20 {
        f();
    }
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    let us = t.elapsed().as_secs_f64() / n as f64 * 1e6;
    println!("{name:40} {us:9.2} µs");
}
fn main() {
    kernels_bench();
    tch::set_num_threads(1);
    let _g = tch::no_grad_guard();
    for rows in [128i64, 4096] {
        let o = (Kind::Float, Device::Cpu);
        let x4 = Tensor::randn([rows, 4], o);
        let h = Tensor::randn([rows, 64], o);
        let w1 = Tensor::randn([4, 64], o);
        let w = Tensor::randn([64, 64], o);
        let w2 = Tensor::randn([64, 2], o);
        let b = Tensor::randn([64], o);
        let d = Tensor::randn([rows, 64], o);
        let d2 = Tensor::randn([rows, 2], o);
        let gw = Tensor::zeros([64, 64], o);
        let flops = (rows * 64 * 64 * 2) as f64;
        println!("rows {rows}");
        time("addmm x4 w1", 2000, || {
            let _ = b.addmm(&x4, &w1);
        });
        let n = if rows > 1000 { 500 } else { 5000 };
        let t = Instant::now();
        for _ in 0..n {
            let _ = b.addmm(&h, &w);
        }
        let s = t.elapsed().as_secs_f64() / n as f64;
        println!("{:40} {:9.2} µs  {:.1} GFLOP/s", "addmm h w (64x64)", s * 1e6, flops / s / 1e9);
        let t = Instant::now();
        for _ in 0..n {
            let _ = h.mm(&w);
        }
        let s = t.elapsed().as_secs_f64() / n as f64;
        println!("{:40} {:9.2} µs  {:.1} GFLOP/s", "mm h w", s * 1e6, flops / s / 1e9);
        let t = Instant::now();
        for _ in 0..n {
            let _ = h.tr().mm_out(&gw, &d);
        }
        let s = t.elapsed().as_secs_f64() / n as f64;
        println!("{:40} {:9.2} µs  {:.1} GFLOP/s", "xT d into gw", s * 1e6, flops / s / 1e9);
        let t = Instant::now();
        for _ in 0..n {
            let _ = d.mm(&w.tr());
        }
        let s = t.elapsed().as_secs_f64() / n as f64;
        println!("{:40} {:9.2} µs  {:.1} GFLOP/s", "d wT", s * 1e6, flops / s / 1e9);
        time("addmm h w2 (head)", n, || {
            let _ = w2.sum(Kind::Float).addmm(&h, &w2);
        });
        time("d2 w2T", n, || {
            let _ = d2.mm(&w2.tr());
        });
        time("(d2T h)T copy", n, || {
            let _ = gw.narrow(1, 0, 2).copy_(&d2.tr().mm(&h).tr());
        });
        time("empty_like", n, || {
            let _ = h.empty_like();
        });
    }
}
pub fn kernels_bench() {
    use hotlab::kernels::*;
    for rows in [128usize, 4096] {
        println!("kernels rows {rows}");
        let x4: Vec<f32> = (0..rows * 4).map(|i| (i % 7) as f32 * 0.1).collect();
        let h: Vec<f32> = (0..rows * 64).map(|i| (i % 13) as f32 * 0.01).collect();
        let w1: Vec<f32> = vec![0.1; 4 * 64];
        let w2t: Vec<f32> = vec![0.1; 2 * 64];
        let b64 = vec![0.0f32; 64];
        let b2 = vec![0.0f32; 2];
        let mut y64 = vec![0f32; rows * 64];
        let mut y2 = vec![0f32; rows * 2];
        let d2: Vec<f32> = vec![0.3; rows * 2];
        let mut g = vec![0f32; 4 * 64];
        let mut g2 = vec![0f32; 2 * 64];
        let n = if rows > 1000 { 500 } else { 5000 };
        time("small_k x4 w1", n, || matmul_small_k(&x4, &w1, Some(&b64), &mut y64, 64));
        time("narrow_n h w2", n, || matmul_narrow_n(&h, &w2t, Some(&b2), &mut y2, 2));
        time("outer x4 d (gw1)", n, || outer_sum_small(&x4, &h, &mut g, 4));
        time("outer d2 h (gw2t)", n, || outer_sum_small(&d2, &h, &mut g2, 2));
        time("d2 w2 -> 64 (small_k)", n, || matmul_small_k(&d2, &w2t, None, &mut y64, 64));
        time("tanh 64", n, || tanh_in_place(&mut y64));
        time("tanh_backward 64", n, || tanh_backward_in_place(&mut y64, &h));
        time("column_sums 64", n, || column_sums(&h, &mut g[..64]));
    }
}
