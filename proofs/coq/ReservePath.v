(* ADM-PRE-5: a write-then-check reservation at preflight (vLLM #58192) keeps
   the admitted global count at most M, for every number of servers N, cap M,
   largest weight W and any number of requests of one server in flight
   (specs/admission.md, "The whole admission path";
   specs/preflight-reservations.md).

   The model (queueref.models.path_models, path reserve-write-then-check):
     start    p n  a server p with no check in progress writes the reservation
                   n into its slot (c_p += n) and starts a check of weight n;
     read     p    p reads its next slot k < N into the view;
     decide   p    once all N slots are read: keep iff view <= M -- the n move
                   to rendering (held in the slot) -- else give them back
                   (c_p -= n);
     register p m  m requests of p that were rendering are registered: the
                   reservation becomes the registered count, no slot changes;
     fail     p m  m requests of p that were rendering fail to render or lose
                   their client: c_p -= m;
     finish   p    one registered request of p finishes: c_p -= 1; it needs a
                   registered one, c_p > (p's check in progress) + rendering.
   `rendering p` is the total weight of p's requests between their keep and
   their registration: any number of them, so any number of requests of one
   server in flight (a server runs one check at a time: the check has no
   `await`).  Registering or failing any 1 <= m <= rendering p allows more
   than the requests' own weights: more runs, and the theorem covers them.

   Theorem reserve_admitted_le_cap: in every reachable state the admitted
   total -- each slot minus its server's check in progress, the rendering
   requests included -- is at most M.  The proof is a simulation: every
   reachable state is, slot for slot and check for check, a reachable state
   of WriteThenCheck.v's model (rendering and registering change no slot; a
   failure of m is m finishes), whose admitted total is at most M
   (wtc_admitted_le_cap).  No new invariant about the reads is needed. *)

From Coq Require Import Arith Lia.
From Queueref Require Import WriteThenCheck.

Record pstate := mk_pstate {
  pslots : nat -> nat;
  pchecks : nat -> option check;
  rendering : nat -> nat
}.

Definition pinit : pstate := mk_pstate (fun _ => 0) (fun _ => None) (fun _ => 0).

(* The check in progress of p, as WriteThenCheck.v's reservation. *)
Definition preservation (s : pstate) (p : nat) : nat :=
  match pchecks s p with
  | Some c => ck_n c
  | None => 0
  end.

Definition padmitted_total (N : nat) (s : pstate) : nat :=
  sum (fun p => pslots s p - preservation s p) N.

Inductive paction : Type :=
| PStart (p n : nat)
| PRead (p : nat)
| PDecide (p : nat)
| PRegister (p m : nat)
| PFail (p m : nat)
| PFinish (p : nat).

Section Path.
  Variables N M W : nat.

  Inductive pstep : pstate -> paction -> pstate -> Prop :=
  | ps_start : forall s p n,
      p < N -> 1 <= n -> n <= W -> pchecks s p = None ->
      pstep s (PStart p n)
        (mk_pstate (upd (pslots s) p (pslots s p + n))
           (upd (pchecks s) p (Some (mk_check n 0 0))) (rendering s))
  | ps_read : forall s p c,
      p < N -> pchecks s p = Some c -> ck_next c < N ->
      pstep s (PRead p)
        (mk_pstate (pslots s)
           (upd (pchecks s) p
              (Some (mk_check (ck_n c) (S (ck_next c))
                       (accumulate (ck_view c) (pslots s (ck_next c))))))
           (rendering s))
  | ps_keep : forall s p c,
      p < N -> pchecks s p = Some c -> N <= ck_next c -> keeps M (ck_view c) = true ->
      pstep s (PDecide p)
        (mk_pstate (pslots s) (upd (pchecks s) p None)
           (upd (rendering s) p (rendering s p + ck_n c)))
  | ps_rollback : forall s p c,
      p < N -> pchecks s p = Some c -> N <= ck_next c -> keeps M (ck_view c) = false ->
      pstep s (PDecide p)
        (mk_pstate (upd (pslots s) p (pslots s p - ck_n c)) (upd (pchecks s) p None)
           (rendering s))
  | ps_register : forall s p m,
      p < N -> 1 <= m -> m <= rendering s p ->
      pstep s (PRegister p m)
        (mk_pstate (pslots s) (pchecks s) (upd (rendering s) p (rendering s p - m)))
  | ps_fail : forall s p m,
      p < N -> 1 <= m -> m <= rendering s p ->
      pstep s (PFail p m)
        (mk_pstate (upd (pslots s) p (pslots s p - m)) (pchecks s)
           (upd (rendering s) p (rendering s p - m)))
  | ps_finish : forall s p,
      p < N -> preservation s p + rendering s p < pslots s p ->
      pstep s (PFinish p)
        (mk_pstate (upd (pslots s) p (pslots s p - 1)) (pchecks s) (rendering s)).

  Inductive preachable : pstate -> Prop :=
  | preach_init : preachable pinit
  | preach_step : forall s a s', preachable s -> pstep s a s' -> preachable s'.

  (* The simulation: a reachable state of WriteThenCheck.v with the same slots
     and checks, and every slot holding its check and its rendering requests. *)
  Definition simulated (s : pstate) : Prop :=
    exists t, reachable N M W t /\
      (forall j, slots t j = pslots s j) /\ (forall j, checks t j = pchecks s j) /\
      (forall j, preservation s j + rendering s j <= pslots s j).

  (* m finishes in a row, while the slot holds more than the check in progress. *)
  Lemma finishes : forall m t p,
      reachable N M W t -> p < N -> reservation t p + m <= slots t p ->
      exists t', reachable N M W t' /\ slots t' p = slots t p - m /\
        (forall j, j <> p -> slots t' j = slots t j) /\ (forall j, checks t' j = checks t j).
  Proof.
    induction m as [|m IH]; intros t p Hr Hp Hm.
    - exists t; repeat split; auto; lia.
    - destruct (IH t p Hr Hp ltac:(lia)) as [t1 [Hr1 [Hs1 [Ho1 Hc1]]]].
      exists (after_finish t1 p); split; [|split; [|split]].
      + apply reach_step with t1 (Finish p); [exact Hr1|].
        apply step_finish; [exact Hp|].
        assert (reservation t1 p = reservation t p) by (unfold reservation; now rewrite Hc1).
        lia.
      + cbn; rewrite upd_same; lia.
      + intros j Hj; cbn; rewrite upd_other by exact Hj; auto.
      + intros j; cbn; auto.
  Qed.

  Lemma preservation_image : forall s t p,
      (forall j, checks t j = pchecks s j) -> reservation t p = preservation s p.
  Proof. intros s t p Hc; unfold reservation, preservation; now rewrite Hc. Qed.

  Lemma simulated_init : simulated pinit.
  Proof.
    exists init; split; [apply reach_init|]; repeat split; intros; cbn; auto.
  Qed.

  Lemma simulated_step : forall s a s', simulated s -> pstep s a s' -> simulated s'.
  Proof.
    intros s a s' Hsim Hstep; revert Hsim.
    destruct Hstep as [s p n Hp Hn HW Hnone | s p c Hp Hck Hk | s p c Hp Hck Hk Hkeep
                      | s p c Hp Hck Hk Hkeep | s p m Hp Hm Hmr | s p m Hp Hm Hmr
                      | s p Hp Hfin];
      intros [t [Hr [Hs [Hc Hh]]]].
    - (* start: the same start *)
      exists (after_start t p n); split; [|split; [|split]].
      + apply reach_step with t (Start p n); [exact Hr|].
        apply step_start; auto. now rewrite Hc.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); rewrite ?Hs; auto.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); auto.
      + intros j; unfold preservation; cbn; unfold upd.
        destruct (Nat.eqb_spec j p) as [->|Hjp]; cbn.
        * specialize (Hh p); unfold preservation in Hh; rewrite Hnone in Hh; lia.
        * exact (Hh j).
    - (* read: the same read *)
      exists (after_read t p c); split; [|split; [|split]].
      + apply reach_step with t (Read p); [exact Hr|].
        apply step_read; auto. now rewrite Hc.
      + intros j; cbn; auto.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); auto. now rewrite Hs.
      + intros j; unfold preservation; cbn; unfold upd.
        destruct (Nat.eqb_spec j p) as [->|Hjp]; cbn.
        * specialize (Hh p); unfold preservation in Hh; rewrite Hck in Hh; lia.
        * exact (Hh j).
    - (* keep: the same keep; the n go on rendering *)
      exists (after_keep t p); split; [|split; [|split]].
      + apply reach_step with t (Decide p); [exact Hr|].
        apply step_keep with c; auto. now rewrite Hc.
      + intros j; cbn; auto.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); auto.
      + intros j; unfold preservation; cbn; unfold upd.
        destruct (Nat.eqb_spec j p) as [->|Hjp]; cbn.
        * specialize (Hh p); unfold preservation in Hh; rewrite Hck in Hh; lia.
        * exact (Hh j).
    - (* rollback: the same rollback *)
      exists (after_rollback t p c); split; [|split; [|split]].
      + apply reach_step with t (Decide p); [exact Hr|].
        apply step_rollback; auto. now rewrite Hc.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); rewrite ?Hs; auto.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); auto.
      + intros j; unfold preservation; cbn; unfold upd.
        destruct (Nat.eqb_spec j p) as [->|Hjp]; cbn.
        * specialize (Hh p); unfold preservation in Hh; rewrite Hck in Hh; lia.
        * exact (Hh j).
    - (* register: no step at all, the slots stay *)
      exists t; split; [exact Hr|split; [|split]].
      + exact Hs.
      + exact Hc.
      + intros j; unfold preservation; cbn; unfold upd.
        destruct (Nat.eqb_spec j p) as [->|Hjp].
        * specialize (Hh p); unfold preservation in Hh; lia.
        * exact (Hh j).
    - (* fail: m finishes *)
      assert (Hroom : reservation t p + m <= slots t p).
      { rewrite (preservation_image s t p Hc), Hs. specialize (Hh p). lia. }
      destruct (finishes m t p Hr Hp Hroom) as [t' [Hr' [Hsp [Hso Hc']]]].
      exists t'; split; [exact Hr'|split; [|split]].
      + intros j; cbn; unfold upd; destruct (Nat.eqb_spec j p) as [->|Hjp].
        * rewrite Hsp, Hs; reflexivity.
        * rewrite Hso by exact Hjp; apply Hs.
      + intros j; cbn; rewrite Hc'; apply Hc.
      + intros j; unfold preservation; cbn; unfold upd.
        destruct (Nat.eqb_spec j p) as [->|Hjp].
        * specialize (Hh p); unfold preservation in Hh; lia.
        * exact (Hh j).
    - (* finish: the same finish *)
      exists (after_finish t p); split; [|split; [|split]].
      + apply reach_step with t (Finish p); [exact Hr|].
        apply step_finish; auto. rewrite (preservation_image s t p Hc), Hs; lia.
      + intros j; cbn; unfold upd; destruct (Nat.eqb j p); rewrite ?Hs; auto.
      + intros j; cbn; auto.
      + intros j; unfold preservation; cbn; unfold upd.
        destruct (Nat.eqb_spec j p) as [->|Hjp].
        * unfold preservation in Hfin; lia.
        * exact (Hh j).
  Qed.

  Lemma preachable_simulated : forall s, preachable s -> simulated s.
  Proof.
    intros s Hr; induction Hr as [|s a s' _ IH Hstep].
    - apply simulated_init.
    - exact (simulated_step s a s' IH Hstep).
  Qed.
End Path.

(* ADM-PRE-5: the write-then-check reservation at preflight never admits more
   than M, whatever N, M, W and the requests in flight per server. *)
Theorem reserve_admitted_le_cap : forall N M W s,
    preachable N M W s -> padmitted_total N s <= M.
Proof.
  intros N M W s Hr.
  destruct (preachable_simulated N M W s Hr) as [t [Ht [Hs [Hc _]]]].
  replace (padmitted_total N s) with (admitted_total N t).
  - exact (wtc_admitted_le_cap N M W t Ht).
  - unfold admitted_total, padmitted_total; apply sum_ext; intros j _.
    unfold admitted; rewrite (preservation_image s t j Hc), Hs; reflexivity.
Qed.
