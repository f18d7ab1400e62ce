(* ADM-PRE-6: a check-then-write reservation at preflight (vLLM #58192) keeps
   the global count, reservations included, at most M + (N - 1) * min M W,
   for every number of servers N, cap M, largest weight W and any number of
   requests of one server in flight (specs/admission.md, "The whole admission
   path"; specs/preflight-reservations.md).

   The model (queueref.models.path_models, path reserve-check-then-write):
     start    p n  a server p with no check in progress starts a check of
                   weight n (vLLM's preflight check_admission(n));
     read     p    p reads its next slot into the view;
     decide   p    once all N slots are read: if view + n <= M, n is written
                   into the own slot with no await between (the reservation)
                   and the n go on rendering; else p refuses, writing nothing;
     register p m  m requests of p that were rendering are registered: the
                   reservation becomes the registered count, no slot changes;
     fail     p m  m rendering requests fail or lose their client: c_p -= m;
     finish   p    one registered request of p finishes: c_p -= 1 (it needs
                   c_p > rendering p).
   As in ReservePath.v, `rendering p` is the total weight between a
   reservation and its registration: any number of requests per server.

   Theorem reserve_check_bound: every reachable state has
     c_0 + ... + c_{N-1} <= M + (N - 1) * min M W.
   The proof is a simulation into Model.v's fine-grained check-then-write
   (rendering and registering change no slot; a failure of m is m finishes),
   whose bound is Bound.v:ob_bound_1. *)

From Coq Require Import Arith Lia.
From Queueref Require Import Model.
From Queueref Require Bound.

Record rstate := mk_rstate {
  rslots : nat -> nat;
  rchecks : nat -> option check;
  rrendering : nat -> nat
}.

Definition rinit : rstate := mk_rstate (fun _ => 0) (fun _ => None) (fun _ => 0).

Definition rtotal (N : nat) (s : rstate) : nat := sum (rslots s) N.

Inductive raction : Type :=
| RStart (p n : nat)
| RRead (p : nat)
| RDecide (p : nat)
| RRegister (p m : nat)
| RFail (p m : nat)
| RFinish (p : nat).

Section Path.
  Variables N M W : nat.

  Inductive rstep : rstate -> raction -> rstate -> Prop :=
  | rs_start : forall s p n,
      p < N -> 1 <= n -> n <= W -> rchecks s p = None ->
      rstep s (RStart p n)
        (mk_rstate (rslots s) (upd (rchecks s) p (Some (mk_check n first_slot 0)))
           (rrendering s))
  | rs_read : forall s p c,
      p < N -> rchecks s p = Some c -> ck_next c < N ->
      rstep s (RRead p)
        (mk_rstate (rslots s)
           (upd (rchecks s) p
              (Some (mk_check (ck_n c) (next_slot (ck_next c))
                       (accumulate (ck_view c) (rslots s (ck_next c))))))
           (rrendering s))
  | rs_reserve : forall s p c,
      p < N -> rchecks s p = Some c -> N <= ck_next c ->
      admits M (ck_view c) (ck_n c) = true ->
      rstep s (RDecide p)
        (mk_rstate (upd (rslots s) p (rslots s p + ck_n c)) (upd (rchecks s) p None)
           (upd (rrendering s) p (rrendering s p + ck_n c)))
  | rs_refuse : forall s p c,
      p < N -> rchecks s p = Some c -> N <= ck_next c ->
      admits M (ck_view c) (ck_n c) = false ->
      rstep s (RDecide p) (mk_rstate (rslots s) (upd (rchecks s) p None) (rrendering s))
  | rs_register : forall s p m,
      p < N -> 1 <= m -> m <= rrendering s p ->
      rstep s (RRegister p m)
        (mk_rstate (rslots s) (rchecks s) (upd (rrendering s) p (rrendering s p - m)))
  | rs_fail : forall s p m,
      p < N -> 1 <= m -> m <= rrendering s p ->
      rstep s (RFail p m)
        (mk_rstate (upd (rslots s) p (rslots s p - m)) (rchecks s)
           (upd (rrendering s) p (rrendering s p - m)))
  | rs_finish : forall s p,
      p < N -> rrendering s p < rslots s p ->
      rstep s (RFinish p)
        (mk_rstate (upd (rslots s) p (finished (rslots s p))) (rchecks s) (rrendering s)).

  Inductive rreachable : rstate -> Prop :=
  | rreach_init : rreachable rinit
  | rreach_step : forall s a s', rreachable s -> rstep s a s' -> rreachable s'.

  (* A reachable state of Model.v with the same slots and checks, and every
     slot holding at least its rendering requests. *)
  Definition rsimulated (s : rstate) : Prop :=
    exists t, reachable N M W t /\
      (forall j, slots t j = rslots s j) /\ (forall j, checks t j = rchecks s j) /\
      (forall j, rrendering s j <= rslots s j).

  Lemma finishes : forall m t p,
      reachable N M W t -> p < N -> m <= slots t p ->
      exists t', reachable N M W t' /\ slots t' p = slots t p - m /\
        (forall j, j <> p -> slots t' j = slots t j) /\ (forall j, checks t' j = checks t j).
  Proof.
    induction m as [|m IH]; intros t p Hr Hp Hm.
    - exists t; repeat split; auto; lia.
    - destruct (IH t p Hr Hp ltac:(lia)) as [t1 [Hr1 [Hs1 [Ho1 Hc1]]]].
      exists (after_finish t1 p); split; [|split; [|split]].
      + apply reach_step with t1 (Finish p); [exact Hr1|].
        apply step_finish; [exact Hp | lia].
      + cbn; rewrite Bound.upd_same; unfold finished; lia.
      + intros j Hj; cbn; rewrite Bound.upd_other by exact Hj; auto.
      + intros j; cbn; auto.
  Qed.

  Lemma rsimulated_step : forall s a s', rsimulated s -> rstep s a s' -> rsimulated s'.
  Proof.
    intros s a s' Hsim Hstep; revert Hsim.
    destruct Hstep as [s p n Hp Hn HW Hnone | s p c Hp Hck Hk | s p c Hp Hck Hk Hadm
                      | s p c Hp Hck Hk Hadm | s p m Hp Hm Hmr | s p m Hp Hm Hmr
                      | s p Hp Hfin];
      intros [t [Hr [Hs [Hc Hh]]]].
    - (* start: the same start *)
      exists (after_start t p n); split; [|split; [|split]].
      + apply reach_step with t (Start p n); [exact Hr|].
        apply step_start; auto. now rewrite Hc.
      + intros j; cbn; auto.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); auto.
      + exact Hh.
    - (* read: the same read *)
      exists (after_read t p c); split; [|split; [|split]].
      + apply reach_step with t (Read p); [exact Hr|].
        apply step_read; auto. now rewrite Hc.
      + intros j; cbn; auto.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); auto. now rewrite Hs.
      + exact Hh.
    - (* the reservation: check-then-write's admission *)
      exists (after_admit t p c); split; [|split; [|split]].
      + apply reach_step with t (Decide p); [exact Hr|].
        apply step_admit; auto. now rewrite Hc.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); rewrite ?Hs; auto.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); auto.
      + intros j; cbn; unfold upd; destruct (Nat.eqb_spec j p) as [->|Hjp].
        * specialize (Hh p); lia.
        * exact (Hh j).
    - (* refusal: check-then-write's rejection *)
      exists (after_reject t p); split; [|split; [|split]].
      + apply reach_step with t (Decide p); [exact Hr|].
        apply step_reject with c; auto. now rewrite Hc.
      + intros j; cbn; auto.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); auto.
      + exact Hh.
    - (* register: no step at all, the slots stay *)
      exists t; split; [exact Hr|split; [|split]].
      + exact Hs.
      + exact Hc.
      + intros j; cbn; unfold upd; destruct (Nat.eqb_spec j p) as [->|Hjp].
        * specialize (Hh p); lia.
        * exact (Hh j).
    - (* fail: m finishes *)
      assert (Hroom : m <= slots t p) by (rewrite Hs; specialize (Hh p); lia).
      destruct (finishes m t p Hr Hp Hroom) as [t' [Hr' [Hsp [Hso Hc']]]].
      exists t'; split; [exact Hr'|split; [|split]].
      + intros j; cbn; unfold upd; destruct (Nat.eqb_spec j p) as [->|Hjp].
        * rewrite Hsp, Hs; reflexivity.
        * rewrite Hso by exact Hjp; apply Hs.
      + intros j; cbn; rewrite Hc'; apply Hc.
      + intros j; cbn; unfold upd; destruct (Nat.eqb_spec j p) as [->|Hjp].
        * specialize (Hh p); lia.
        * exact (Hh j).
    - (* finish: the same finish *)
      exists (after_finish t p); split; [|split; [|split]].
      + apply reach_step with t (Finish p); [exact Hr|].
        apply step_finish; auto. rewrite Hs; lia.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); rewrite ?Hs; auto.
      + intros j; cbn; auto.
      + intros j; cbn; unfold upd; destruct (Nat.eqb_spec j p) as [->|Hjp].
        * unfold finished; lia.
        * exact (Hh j).
  Qed.

  Lemma rreachable_simulated : forall s, rreachable s -> rsimulated s.
  Proof.
    intros s Hr; induction Hr as [|s a s' _ IH Hstep].
    - exists init; split; [apply reach_init|]; repeat split; intros; cbn; auto.
    - exact (rsimulated_step s a s' IH Hstep).
  Qed.
End Path.

(* ADM-PRE-6: the check-then-write reservation keeps check-then-write's bound. *)
Theorem reserve_check_bound : forall N M W s,
    rreachable N M W s -> rtotal N s <= M + (N - 1) * Nat.min M W.
Proof.
  intros N M W s Hr.
  destruct (rreachable_simulated N M W s Hr) as [t [Ht [Hs _]]].
  replace (rtotal N s) with (total N t).
  - exact (Bound.ob_bound_1 N M W t Ht).
  - unfold total, rtotal; apply Bound.sum_ext; intros j _; apply Hs.
Qed.
