(* OB-WTC-1: write-then-check (queueref's mode="write-then-check") keeps the admitted
   global count at most M, for every number of servers N, cap M and largest
   weight W, over unbounded nat (specs/overshoot-bound.md).

   The model (the write-then-check model of specs/overshoot-bound.md; the
   Python step functions are queueref.admission.protocol: accumulate,
   keeps_reservation):
     start  p n  an idle server p (no check in progress) writes its
                 reservation first, c_p += n (1 <= n <= W), and starts a
                 check of weight n at slot 0 with view 0;
     read   p    p reads its next slot k < N into the view (view + c_k); its
                 own slot, reservation included, is read like any other;
     decide p    once all N slots are read: keep the reservation iff
                 view <= M (the check ends, its n requests are admitted), else
                 roll it back (c_p -= n) and reject;
     finish p    one admitted request of p finishes (c_p -= 1), at any time,
                 also during p's own check; a finish ends an admitted request,
                 never a reservation, so it needs c_p > (p's reservation).

   What "admitted" means (OB-WTC-1: "the slots minus the reservations of checks in
   progress"): admitted s p = c_p - (weight of p's check in progress, or 0).
   Because a reservation is written only by start and removed only by its own
   decide, and a finish needs an admitted request, this is exactly the number
   of requests of p whose check has kept its reservation and that have not
   finished.  A reservation of a check that has not decided yet is not
   admitted, whether it will be kept or rolled back.

   Theorem wtc_admitted_le_cap: in every reachable state,
     admitted 0 + ... + admitted (N-1) <= M.

   Exported (standalone: this file does not import Model.v; logical path
   Queueref.WriteThenCheck): upd, sum, accumulate, keeps (the decision,
   protocol.keeps_reservation), check {ck_n; ck_next; ck_view},
   state {slots; checks}, init, reservation, admitted, admitted_total,
   action (Start p n | Read p | Decide p | Finish p), after_start,
   after_read, after_keep, after_rollback, after_finish, step N M W s a s',
   reachable N M W s, exec N M W s a, run N M W s l, observe N s.
   Lemmas: step_exec (step <-> exec = Some), run_reachable,
   admitted_change, wtc_admitted_le_cap (OB-WTC-1),
   wtc_cap_reached_for_all_n (OB-WTC-2: for N >= 1, W >= 1 the schedule
   cap_fill N M -- server 0 alone, M reservations of 1, each kept -- runs
   from init and ends with admitted total exactly M; with OB-WTC-1 the worst
   admitted total is exactly M).

   The proof is the paper proof of OB-WTC-1 made local, with ghost state
   (a rank per check, in order of reservation; the values each check read;
   the "leader": the kept check with the latest reservation, with its reads):
   for the leader and every check reserved after it, each slot j it has read
   holds at most the value read, counting j's admitted requests plus j's
   reservation in progress if that reservation is not younger than the
   reader.  Summing the leader's reads gives the theorem. *)

From Coq Require Import Arith Bool List Lia.
Import ListNotations.

Definition upd {A : Type} (f : nat -> A) (i : nat) (v : A) : nat -> A :=
  fun j => if Nat.eqb j i then v else f j.

Lemma upd_same : forall A (f : nat -> A) i v, upd f i v i = v.
Proof. intros; unfold upd; now rewrite Nat.eqb_refl. Qed.

Lemma upd_other : forall A (f : nat -> A) i v j, j <> i -> upd f i v j = f j.
Proof. intros; unfold upd; now rewrite (proj2 (Nat.eqb_neq j i) H). Qed.

Fixpoint sum (f : nat -> nat) (k : nat) : nat :=
  match k with
  | 0 => 0
  | S k' => sum f k' + f k'
  end.

Lemma sum_ext : forall f g k, (forall j, j < k -> f j = g j) -> sum f k = sum g k.
Proof.
  intros f g k; induction k as [|k IH]; intros H; simpl; [reflexivity|].
  rewrite IH by (intros; apply H; lia); rewrite (H k) by lia; reflexivity.
Qed.

Lemma sum_le : forall f g k, (forall j, j < k -> f j <= g j) -> sum f k <= sum g k.
Proof.
  intros f g k; induction k as [|k IH]; intros H; simpl; [lia|].
  specialize (H k (Nat.lt_succ_diag_r k)) as Hk.
  assert (sum f k <= sum g k) by (apply IH; intros; apply H; lia); lia.
Qed.

Lemma sum_zero : forall k, sum (fun _ => 0) k = 0.
Proof. induction k; simpl; lia. Qed.

(* The protocol's step functions; each mutant of proofs/coq/theorems.json
   replaces exactly one of these lines. *)
Definition accumulate (view v : nat) : nat := view + v.
Definition keeps (M view : nat) : bool := view <=? M.

Record check := mk_check { ck_n : nat; ck_next : nat; ck_view : nat }.

Record state := mk_state { slots : nat -> nat; checks : nat -> option check }.

Definition init : state := mk_state (fun _ => 0) (fun _ => None).

(* The reservation of p's check in progress, 0 when p has none. *)
Definition reservation (s : state) (p : nat) : nat :=
  match checks s p with
  | Some c => ck_n c
  | None => 0
  end.

Definition admitted (s : state) (p : nat) : nat := slots s p - reservation s p.

Definition admitted_total (N : nat) (s : state) : nat := sum (admitted s) N.

Inductive action : Type :=
| Start (p n : nat)   (* p reserves n in its slot and starts a check of weight n *)
| Read (p : nat)      (* p reads its next slot *)
| Decide (p : nat)    (* p, having read every slot, keeps or rolls back *)
| Finish (p : nat).   (* one admitted request of p finishes *)

Definition after_start (s : state) (p n : nat) : state :=
  mk_state (upd (slots s) p (slots s p + n)) (upd (checks s) p (Some (mk_check n 0 0))).

Definition after_read (s : state) (p : nat) (c : check) : state :=
  mk_state (slots s)
    (upd (checks s) p
       (Some (mk_check (ck_n c) (S (ck_next c))
                (accumulate (ck_view c) (slots s (ck_next c)))))).

Definition after_keep (s : state) (p : nat) : state :=
  mk_state (slots s) (upd (checks s) p None).

Definition after_rollback (s : state) (p : nat) (c : check) : state :=
  mk_state (upd (slots s) p (slots s p - ck_n c)) (upd (checks s) p None).

Definition after_finish (s : state) (p : nat) : state :=
  mk_state (upd (slots s) p (slots s p - 1)) (checks s).

Section Steps.
  Variables N M W : nat.

  Inductive step : state -> action -> state -> Prop :=
  | step_start : forall s p n,
      p < N -> 1 <= n -> n <= W -> checks s p = None ->
      step s (Start p n) (after_start s p n)
  | step_read : forall s p c,
      p < N -> checks s p = Some c -> ck_next c < N ->
      step s (Read p) (after_read s p c)
  | step_keep : forall s p c,
      p < N -> checks s p = Some c -> N <= ck_next c ->
      keeps M (ck_view c) = true ->
      step s (Decide p) (after_keep s p)
  | step_rollback : forall s p c,
      p < N -> checks s p = Some c -> N <= ck_next c ->
      keeps M (ck_view c) = false ->
      step s (Decide p) (after_rollback s p c)
  | step_finish : forall s p,
      p < N -> reservation s p < slots s p ->
      step s (Finish p) (after_finish s p).

  Inductive reachable : state -> Prop :=
  | reach_init : reachable init
  | reach_step : forall s a s', reachable s -> step s a s' -> reachable s'.

  Definition exec (s : state) (a : action) : option state :=
    match a with
    | Start p n =>
        if (p <? N) && (1 <=? n) && (n <=? W) then
          match checks s p with
          | None => Some (after_start s p n)
          | Some _ => None
          end
        else None
    | Read p =>
        if p <? N then
          match checks s p with
          | Some c => if ck_next c <? N then Some (after_read s p c) else None
          | None => None
          end
        else None
    | Decide p =>
        if p <? N then
          match checks s p with
          | Some c =>
              if N <=? ck_next c then
                if keeps M (ck_view c)
                then Some (after_keep s p)
                else Some (after_rollback s p c)
              else None
          | None => None
          end
        else None
    | Finish p =>
        if (p <? N) && (reservation s p <? slots s p) then Some (after_finish s p) else None
    end.

  Fixpoint run (s : state) (l : list action) : option state :=
    match l with
    | [] => Some s
    | a :: l' =>
        match exec s a with
        | Some s' => run s' l'
        | None => None
        end
    end.

  (* The step relation and the executable step function agree. *)
  Lemma step_exec : forall s a s', step s a s' <-> exec s a = Some s'.
  Proof.
    intros s a s'; split.
    - intros H; destruct H; unfold exec.
      + apply Nat.ltb_lt in H; apply Nat.leb_le in H0; apply Nat.leb_le in H1.
        rewrite H, H0, H1, H2; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.ltb_lt in H1.
        rewrite H, H0, H1; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.leb_le in H1.
        rewrite H, H0, H1, H2; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.leb_le in H1.
        rewrite H, H0, H1, H2; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.ltb_lt in H0.
        rewrite H, H0; reflexivity.
    - destruct a as [p n | p | p | p]; unfold exec; intros H.
      + destruct (p <? N) eqn:Hp; destruct (1 <=? n) eqn:H1; destruct (n <=? W) eqn:HW;
          simpl in H; try discriminate.
        destruct (checks s p) eqn:Hc; try discriminate.
        injection H as <-.
        apply Nat.ltb_lt in Hp; apply Nat.leb_le in H1; apply Nat.leb_le in HW.
        now constructor.
      + destruct (p <? N) eqn:Hp; try discriminate.
        destruct (checks s p) as [c|] eqn:Hc; try discriminate.
        destruct (ck_next c <? N) eqn:Hk; try discriminate.
        injection H as <-.
        apply Nat.ltb_lt in Hp; apply Nat.ltb_lt in Hk.
        now apply step_read.
      + destruct (p <? N) eqn:Hp; try discriminate.
        destruct (checks s p) as [c|] eqn:Hc; try discriminate.
        destruct (N <=? ck_next c) eqn:Hk; try discriminate.
        apply Nat.ltb_lt in Hp; apply Nat.leb_le in Hk.
        destruct (keeps M (ck_view c)) eqn:Ha; injection H as <-.
        * now apply (step_keep s p c).
        * now apply (step_rollback s p c).
      + destruct (p <? N) eqn:Hp; destruct (reservation s p <? slots s p) eqn:H0;
          simpl in H; try discriminate.
        injection H as <-.
        apply Nat.ltb_lt in Hp; apply Nat.ltb_lt in H0.
        now constructor.
  Qed.

  Lemma run_reachable : forall l s s',
    reachable s -> run s l = Some s' -> reachable s'.
  Proof.
    induction l as [|a l IH]; simpl; intros s s' Hr H.
    - injection H as <-; exact Hr.
    - destruct (exec s a) as [t|] eqn:He; try discriminate.
      apply (IH t); [|exact H].
      apply reach_step with s a; [exact Hr|].
      now apply step_exec.
  Qed.

  (* ---- The ghost invariant ---- *)

  (* clock: the rank the next check gets; rank p: the rank of p's check in
     progress; reads p j: the value p's check read at slot j; lrank, lreads:
     the leader, the kept check with the latest reservation (initially a
     virtual leader of rank 0 that read 0 everywhere). *)
  Record ghost := mk_ghost {
    clock : nat; rank : nat -> nat; reads : nat -> nat -> nat;
    lrank : nat; lreads : nat -> nat }.

  (* j's reservation in progress, counted by a reader of rank r iff it is not
     younger than the reader. *)
  Definition older (s : state) (g : ghost) (r j : nat) : nat :=
    match checks s j with
    | Some c => if rank g j <=? r then ck_n c else 0
    | None => 0
    end.

  Record ginv (s : state) (g : ghost) : Prop := {
    gi_rank : forall p c, p < N -> checks s p = Some c -> rank g p < clock g;
    gi_lrank : lrank g < clock g;
    gi_resv : forall p, p < N -> reservation s p <= slots s p;
    gi_next : forall p c, p < N -> checks s p = Some c -> ck_next c <= N;
    gi_view : forall p c, p < N -> checks s p = Some c ->
      ck_view c = sum (reads g p) (ck_next c);
    gi_lsum : sum (lreads g) N <= M;
    gi_lead : forall j, j < N -> admitted s j + older s g (lrank g) j <= lreads g j;
    gi_read : forall p c j, p < N -> checks s p = Some c -> lrank g < rank g p ->
      j < ck_next c -> j < N -> admitted s j + older s g (rank g p) j <= reads g p j }.

  Lemma ginv_init : ginv init (mk_ghost 1 (fun _ => 0) (fun _ _ => 0) 0 (fun _ => 0)).
  Proof.
    constructor; cbn; intros; try discriminate; try lia.
    rewrite sum_zero; lia.
  Qed.

  Ltac proj_simpl :=
    cbn [ck_n ck_next ck_view slots checks clock rank reads lrank lreads
         after_start after_read after_keep after_rollback after_finish] in *.

  Ltac upd_case j p :=
    destruct (Nat.eq_dec j p) as [->|?]; proj_simpl;
    [ rewrite ?upd_same in * | rewrite ?upd_other in * by assumption ];
    proj_simpl.

  Lemma ginv_step : forall s a s' g, ginv s g -> step s a s' -> exists g', ginv s' g'.
  Proof.
    intros s a s' g I H; destruct H as
      [s p n Hp Hn1 HnW Hc | s p c Hp Hc Hk | s p c Hp Hc Hk Hkeep
      | s p c Hp Hc Hk Hroll | s p Hp Hfin].
    - (* start: the new check gets the fresh rank, younger than every reader *)
      exists (mk_ghost (S (clock g)) (upd (rank g) p (clock g)) (reads g) (lrank g) (lreads g)).
      assert (Hadm : forall j, admitted (after_start s p n) j = admitted s j).
      { intros j; unfold admitted, reservation, after_start; cbn.
        upd_case j p; [rewrite Hc; cbn; lia | reflexivity]. }
      constructor; cbn [clock rank reads lrank lreads]; intros.
      + upd_case p0 p; [lia|]. pose proof (gi_rank s g I p0 c H H0); lia.
      + pose proof (gi_lrank s g I); lia.
      + unfold reservation; cbn; upd_case p0 p; [lia|].
        exact (gi_resv s g I p0 H).
      + upd_case p0 p; [injection H0 as <-; cbn; lia|]. exact (gi_next s g I p0 c H H0).
      + upd_case p0 p; [injection H0 as <-; reflexivity|]. exact (gi_view s g I p0 c H H0).
      + exact (gi_lsum s g I).
      + rewrite Hadm. pose proof (gi_lead s g I j H) as L; unfold older in L |- *.
        pose proof (gi_lrank s g I).
        upd_case j p.
        * rewrite Hc in L. destruct (Nat.leb_spec (clock g) (lrank g)); lia.
        * exact L.
      + rewrite Hadm. upd_case p0 p.
        * injection H0 as <-; cbn in H2; lia.
        * pose proof (gi_read s g I p0 c j H H0 H1 H2 H3) as R; unfold older in R |- *.
          pose proof (gi_rank s g I p0 c H H0).
          upd_case j p.
          -- rewrite Hc in R. destruct (Nat.leb_spec (clock g) (rank g p0)); lia.
          -- exact R.
    - (* read: record the value read at slot ck_next c *)
      set (k := ck_next c) in *.
      exists (mk_ghost (clock g) (rank g) (upd (reads g) p (upd (reads g p) k (slots s k)))
                (lrank g) (lreads g)).
      assert (Hres : forall j, reservation (after_read s p c) j = reservation s j).
      { intros j; unfold reservation, after_read; cbn. upd_case j p; [rewrite Hc|]; reflexivity. }
      assert (Hadm : forall j, admitted (after_read s p c) j = admitted s j).
      { intros j; unfold admitted; rewrite Hres; reflexivity. }
      assert (Hold : forall r j, older (after_read s p c) (mk_ghost (clock g) (rank g)
                (upd (reads g) p (upd (reads g p) k (slots s k))) (lrank g) (lreads g)) r j
                = older s g r j).
      { intros r j; unfold older, after_read; cbn. upd_case j p; [rewrite Hc|]; reflexivity. }
      constructor; cbn [clock rank reads lrank lreads]; intros.
      + unfold after_read in H0; cbn in H0. upd_case p0 p.
        * exact (gi_rank s g I p c Hp Hc).
        * exact (gi_rank s g I p0 c0 H H0).
      + exact (gi_lrank s g I).
      + rewrite Hres. exact (gi_resv s g I p0 H).
      + unfold after_read in H0; cbn in H0. upd_case p0 p.
        * injection H0 as <-; cbn; lia.
        * exact (gi_next s g I p0 c0 H H0).
      + unfold after_read in H0; cbn in H0. upd_case p0 p.
        * injection H0 as <-; cbn. rewrite upd_same, (gi_view s g I p c Hp Hc).
          unfold accumulate; fold k; f_equal.
          apply sum_ext; intros j Hj. rewrite upd_other by lia; reflexivity.
        * exact (gi_view s g I p0 c0 H H0).
      + exact (gi_lsum s g I).
      + rewrite Hadm, Hold. exact (gi_lead s g I j H).
      + rewrite Hadm, Hold. unfold after_read in H0; cbn in H0. upd_case p0 p.
        * injection H0 as <-; cbn in H2.
          destruct (Nat.eq_dec j k) as [->|?].
          -- rewrite upd_same.
             pose proof (gi_resv s g I k H3) as Rv.
             unfold admitted, older, reservation in *.
             destruct (checks s k) as [d|]; [destruct (rank g k <=? rank g p)|]; lia.
          -- rewrite upd_other by assumption. apply (gi_read s g I p c j Hp Hc H1); lia.
        * exact (gi_read s g I p0 c0 j H H0 H1 H2 H3).
    - (* keep: a check reserved after the leader becomes the leader *)
      assert (Hall : N = ck_next c) by (pose proof (gi_next s g I p c Hp Hc); lia).
      assert (Hadm : forall j, j <> p -> admitted (after_keep s p) j = admitted s j).
      { intros j Hj; unfold admitted, reservation, after_keep; cbn.
        rewrite upd_other by assumption; reflexivity. }
      assert (Hadmp : admitted (after_keep s p) p = slots s p).
      { unfold admitted, reservation, after_keep; cbn; rewrite upd_same; lia. }
      assert (Hrp : reservation s p = ck_n c) by (unfold reservation; rewrite Hc; reflexivity).
      pose proof (gi_resv s g I p Hp) as Hresp.
      destruct (Nat.le_gt_cases (rank g p) (lrank g)) as [Hstale | Hfresh].
      + (* reserved before the leader: the leader stays *)
        exists g.
        constructor; intros.
        * unfold after_keep in H0; cbn in H0. upd_case p0 p; [discriminate|].
          exact (gi_rank s g I p0 c0 H H0).
        * exact (gi_lrank s g I).
        * unfold reservation, after_keep; cbn. upd_case p0 p; [lia|].
          exact (gi_resv s g I p0 H).
        * unfold after_keep in H0; cbn in H0. upd_case p0 p; [discriminate|].
          exact (gi_next s g I p0 c0 H H0).
        * unfold after_keep in H0; cbn in H0. upd_case p0 p; [discriminate|].
          exact (gi_view s g I p0 c0 H H0).
        * exact (gi_lsum s g I).
        * pose proof (gi_lead s g I j H) as L; unfold older in *.
          upd_case j p.
          -- rewrite Hadmp. rewrite Hc in L.
             replace (rank g p <=? lrank g) with true in L by (symmetry; apply Nat.leb_le; lia).
             unfold admitted in L; lia.
          -- rewrite Hadm by assumption. exact L.
        * unfold after_keep in H0; cbn in H0. upd_case p0 p; [discriminate|].
          pose proof (gi_read s g I p0 c0 j H H0 H1 H2 H3) as R; unfold older in *.
          upd_case j p.
          -- rewrite Hadmp. rewrite Hc in R.
             replace (rank g p <=? rank g p0) with true in R
               by (symmetry; apply Nat.leb_le; lia).
             unfold admitted in R; lia.
          -- rewrite Hadm by assumption. exact R.
      + (* reserved after the leader: the new leader, with its reads *)
        exists (mk_ghost (clock g) (rank g) (reads g) (rank g p) (reads g p)).
        constructor; cbn [clock rank reads lrank lreads]; intros.
        * unfold after_keep in H0; cbn in H0. upd_case p0 p; [discriminate|].
          exact (gi_rank s g I p0 c0 H H0).
        * exact (gi_rank s g I p c Hp Hc).
        * unfold reservation, after_keep; cbn. upd_case p0 p; [lia|].
          exact (gi_resv s g I p0 H).
        * unfold after_keep in H0; cbn in H0. upd_case p0 p; [discriminate|].
          exact (gi_next s g I p0 c0 H H0).
        * unfold after_keep in H0; cbn in H0. upd_case p0 p; [discriminate|].
          exact (gi_view s g I p0 c0 H H0).
        * (* the leader's reads fit: they sum to the view that was kept *)
          rewrite Hall, <- (gi_view s g I p c Hp Hc).
          unfold keeps in Hkeep; apply Nat.leb_le in Hkeep; lia.
        * pose proof (gi_read s g I p c j Hp Hc Hfresh ltac:(lia) H) as R.
          unfold older in *.
          upd_case j p.
          -- rewrite Hadmp. rewrite Hc, Nat.leb_refl in R. unfold admitted in R; lia.
          -- rewrite Hadm by assumption. exact R.
        * unfold after_keep in H0; cbn in H0. upd_case p0 p; [discriminate|].
          pose proof (gi_read s g I p0 c0 j H H0 ltac:(lia) H2 H3) as R.
          unfold older in *.
          upd_case j p.
          -- rewrite Hadmp. rewrite Hc in R.
             replace (rank g p <=? rank g p0) with true in R
               by (symmetry; apply Nat.leb_le; lia).
             unfold admitted in R; lia.
          -- rewrite Hadm by assumption. exact R.
    - (* rollback: the admitted count is unchanged, the reservation is gone *)
      exists g.
      assert (Hrp : reservation s p = ck_n c) by (unfold reservation; rewrite Hc; reflexivity).
      pose proof (gi_resv s g I p Hp) as Hresp.
      assert (Hadm : forall j, admitted (after_rollback s p c) j = admitted s j).
      { intros j; unfold admitted, reservation, after_rollback; cbn.
        upd_case j p; [rewrite Hc; unfold reservation in Hresp; rewrite Hc in Hresp; lia
                      | reflexivity]. }
      assert (Hold : forall r j, older (after_rollback s p c) g r j <= older s g r j).
      { intros r j; unfold older, after_rollback; cbn. upd_case j p; [lia | lia]. }
      constructor; intros.
      + unfold after_rollback in H0; cbn in H0. upd_case p0 p; [discriminate|].
        exact (gi_rank s g I p0 c0 H H0).
      + exact (gi_lrank s g I).
      + unfold reservation, after_rollback; cbn. upd_case p0 p; [lia|].
        exact (gi_resv s g I p0 H).
      + unfold after_rollback in H0; cbn in H0. upd_case p0 p; [discriminate|].
        exact (gi_next s g I p0 c0 H H0).
      + unfold after_rollback in H0; cbn in H0. upd_case p0 p; [discriminate|].
        exact (gi_view s g I p0 c0 H H0).
      + exact (gi_lsum s g I).
      + rewrite Hadm. pose proof (Hold (lrank g) j). pose proof (gi_lead s g I j H). lia.
      + unfold after_rollback in H0; cbn in H0. upd_case p0 p; [discriminate|].
        rewrite Hadm. pose proof (Hold (rank g p0) j).
        pose proof (gi_read s g I p0 c0 j H H0 H1 H2 H3). lia.
    - (* finish: one admitted request less *)
      exists g.
      assert (Hadm : forall j, admitted (after_finish s p) j <= admitted s j).
      { intros j; unfold admitted, reservation, after_finish; cbn. upd_case j p; lia. }
      assert (Hold : forall r j, older (after_finish s p) g r j = older s g r j).
      { reflexivity. }
      constructor; intros.
      + exact (gi_rank s g I p0 c H H0).
      + exact (gi_lrank s g I).
      + unfold reservation, after_finish in *; cbn. upd_case p0 p; [lia|].
        exact (gi_resv s g I p0 H).
      + exact (gi_next s g I p0 c H H0).
      + exact (gi_view s g I p0 c H H0).
      + exact (gi_lsum s g I).
      + rewrite Hold. pose proof (Hadm j). pose proof (gi_lead s g I j H). lia.
      + rewrite Hold. pose proof (Hadm j).
        pose proof (gi_read s g I p0 c j H H0 H1 H2 H3). lia.
  Qed.

  Lemma reachable_ginv : forall s, reachable s -> exists g, ginv s g.
  Proof.
    intros s H; induction H as [|s a s' _ [g I] Hs].
    - eexists; exact ginv_init.
    - exact (ginv_step s a s' g I Hs).
  Qed.

  (* OB-WTC-1 *)
  Theorem wtc_admitted_le_cap : forall s, reachable s -> admitted_total N s <= M.
  Proof.
    intros s Hr; destruct (reachable_ginv s Hr) as [g I]; unfold admitted_total.
    apply Nat.le_trans with (sum (lreads g) N); [|exact (gi_lsum s g I)].
    apply sum_le; intros j Hj. pose proof (gi_lead s g I j Hj); lia.
  Qed.

  (* What "admitted" counts: from step to step, the admitted count of a
     server j grows only when j's own check keeps its reservation, by that
     check's weight, and falls only by one at each finish of j; starts (the
     reservation), reads and rollbacks leave it unchanged. *)
  Lemma reachable_resv : forall s p, reachable s -> p < N -> reservation s p <= slots s p.
  Proof. intros s p Hr Hp; destruct (reachable_ginv s Hr) as [g I]; exact (gi_resv s g I p Hp). Qed.

  Definition kept_weight (s : state) (a : action) (j : nat) : nat :=
    match a, checks s j with
    | Decide p, Some c => if (j =? p) && keeps M (ck_view c) then ck_n c else 0
    | _, _ => 0
    end.

  Definition finished_count (a : action) (j : nat) : nat :=
    match a with
    | Finish p => if j =? p then 1 else 0
    | _ => 0
    end.

  Lemma admitted_change : forall s a s' j, reachable s -> step s a s' -> j < N ->
    admitted s' j + finished_count a j = admitted s j + kept_weight s a j.
  Proof.
    intros s a s' j Hr H Hj; pose proof (reachable_resv s j Hr Hj) as Hres.
    unfold kept_weight, finished_count.
    destruct H as
      [s p n Hp Hn1 HnW Hc | s p c Hp Hc Hk | s p c Hp Hc Hk Hkeep
      | s p c Hp Hc Hk Hroll | s p Hp Hfin]; unfold admitted, reservation in *.
    - upd_case j p; try rewrite Hc in *; lia.
    - upd_case j p; try rewrite Hc in *; lia.
    - upd_case j p.
      + rewrite Hc, Nat.eqb_refl, Hkeep in *; cbn [andb]; lia.
      + rewrite (proj2 (Nat.eqb_neq j p) n); cbn [andb].
        destruct (checks s j); lia.
    - upd_case j p.
      + rewrite Hc, Nat.eqb_refl, Hroll in *; cbn [andb]; lia.
      + rewrite (proj2 (Nat.eqb_neq j p) n); cbn [andb].
        destruct (checks s j); lia.
    - upd_case j p.
      + rewrite Nat.eqb_refl; lia.
      + rewrite (proj2 (Nat.eqb_neq j p) n); lia.
  Qed.
End Steps.

(* A computable picture of a state, as in Model.v: the first N slots and
   checks (weight, next slot, view). *)
Definition observe (N : nat) (s : state) : list nat * list (option (nat * nat * nat)) :=
  (map (slots s) (seq 0 N),
   map (fun p => option_map (fun c => (ck_n c, ck_next c, ck_view c)) (checks s p))
       (seq 0 N)).

(* ---- OB-WTC-2: the cap is reached, for every N >= 1, M and W >= 1 ----

   The schedule cap_fill N M: M times, server 0 reserves 1, reads all N
   slots (it sees only its own slot, reservation included: i + 1 <= M) and
   keeps.  It ends with admitted total exactly M. *)

Definition fill_round (N : nat) : list action := Start 0 1 :: repeat (Read 0) N ++ [Decide 0].

Definition cap_fill (N M : nat) : list action := concat (repeat (fill_round N) M).

Lemma wtc_sum_first : forall f a k,
  (forall j, f j = if j =? 0 then a else 0) -> sum f (S k) = a.
Proof.
  intros f a k H; induction k as [|k IH].
  - simpl; rewrite (H 0); reflexivity.
  - change (sum f (S (S k))) with (sum f (S k) + f (S k)); rewrite IH, (H (S k)); simpl; lia.
Qed.

Lemma wtc_run_app : forall N M W l1 l2 s,
  run N M W s (l1 ++ l2) =
  match run N M W s l1 with Some t => run N M W t l2 | None => None end.
Proof.
  intros N M W l1; induction l1 as [|a l1 IH]; intros l2 s; simpl; [reflexivity|].
  destruct (exec N M W s a); [apply IH | reflexivity].
Qed.

Lemma wtc_run_one : forall N M W s a l t,
  exec N M W s a = Some t -> run N M W s (a :: l) = run N M W t l.
Proof. intros N M W s a l t H; cbn [run]; rewrite H; reflexivity. Qed.

Ltac wtc_cmp :=
  repeat match goal with
  | |- context [?a <? ?b] =>
      first [ rewrite (proj2 (Nat.ltb_lt a b)) by lia
            | rewrite (proj2 (Nat.ltb_ge a b)) by lia ]
  | |- context [?a <=? ?b] =>
      first [ rewrite (proj2 (Nat.leb_le a b)) by lia
            | rewrite (proj2 (Nat.leb_gt a b)) by lia ]
  end.

Section Fill.
  Variables N M W : nat.

  Lemma wtc_reads : forall m t p c,
    p < N -> checks t p = Some c -> ck_next c + m <= N ->
    ck_view c = sum (slots t) (ck_next c) ->
    exists t', run N M W t (repeat (Read p) m) = Some t' /\ slots t' = slots t /\
      checks t' p = Some (mk_check (ck_n c) (ck_next c + m) (sum (slots t) (ck_next c + m))) /\
      (forall q, q <> p -> checks t' q = checks t q).
  Proof.
    induction m as [|m IH]; intros t p c Hp Hc Hk Hv.
    - exists t; simpl; repeat split.
      rewrite Hc, Nat.add_0_r, <- Hv; destruct c; reflexivity.
    - set (c1 := mk_check (ck_n c) (S (ck_next c))
                   (accumulate (ck_view c) (slots t (ck_next c)))).
      assert (He : exec N M W t (Read p) = Some (after_read t p c))
        by (unfold exec; wtc_cmp; rewrite Hc; wtc_cmp; reflexivity).
      cbn [repeat]; rewrite (wtc_run_one N M W t (Read p) _ _ He).
      assert (Hc1 : checks (after_read t p c) p = Some c1)
        by (unfold after_read; cbn [checks]; rewrite upd_same; reflexivity).
      assert (Hk1 : ck_next c1 + m <= N) by (cbn [c1 ck_next]; lia).
      assert (Hv1 : ck_view c1 = sum (slots (after_read t p c)) (ck_next c1))
        by (cbn [c1 ck_view ck_next after_read slots]; unfold accumulate;
            rewrite Hv; reflexivity).
      destruct (IH (after_read t p c) p c1 Hp Hc1 Hk1 Hv1) as (t' & Hrun & Hs & Hcp & Ho).
      unfold after_read, c1, accumulate in *; cbn [slots checks ck_n ck_next ck_view] in *.
      exists t'; repeat split; try assumption.
      + replace (ck_next c + S m) with (S (ck_next c) + m) by lia; exact Hcp.
      + intros q Hq; rewrite (Ho q Hq), upd_other by exact Hq; reflexivity.
  Qed.

  Definition fill_shape (i : nat) (t : state) : Prop :=
    (forall q, checks t q = None) /\ (forall q, slots t q = if q =? 0 then i else 0).

  Lemma wtc_fill_round : forall i t, 1 <= N -> 1 <= W -> i + 1 <= M -> fill_shape i t ->
    exists t', run N M W t (fill_round N) = Some t' /\ fill_shape (i + 1) t'.
  Proof.
    intros i t HN HW Hi [Hc Hs].
    unfold fill_round.
    rewrite (wtc_run_one N M W t (Start 0 1) _ (after_start t 0 1))
      by (unfold exec; wtc_cmp; rewrite (Hc 0); reflexivity).
    rewrite wtc_run_app.
    assert (Hc1 : checks (after_start t 0 1) 0 = Some (mk_check 1 0 0))
      by (unfold after_start; cbn [checks]; rewrite upd_same; reflexivity).
    destruct (wtc_reads N (after_start t 0 1) 0 (mk_check 1 0 0)
                ltac:(lia) Hc1 ltac:(cbn; lia) ltac:(reflexivity))
      as (t2 & Hrun & Hs2 & Hc2 & Ho2).
    unfold after_start in *; cbn [slots checks ck_n ck_next ck_view] in *.
    rewrite Nat.add_0_l in Hc2. rewrite Hrun; cbv beta iota.
    (* the view holds the own reservation: i + 1 *)
    assert (Hsum : sum (upd (slots t) 0 (slots t 0 + 1)) N = i + 1).
    { destruct N as [|N']; [lia|]. apply wtc_sum_first; intros q.
      destruct (Nat.eq_dec q 0) as [->|Hq].
      - rewrite upd_same, (Hs 0); reflexivity.
      - rewrite upd_other, (Hs q) by exact Hq. destruct (Nat.eqb_spec q 0); [lia | reflexivity]. }
    rewrite (wtc_run_one N M W t2 (Decide 0) _ (after_keep t2 0))
      by (unfold exec; wtc_cmp; rewrite Hc2, Hsum; cbn [ck_next ck_view ck_n];
          wtc_cmp; unfold keeps; wtc_cmp; reflexivity).
    eexists; split; [reflexivity|]. unfold after_keep; split; intros q; cbn [slots checks].
    - destruct (Nat.eq_dec q 0) as [->|Hq]; [rewrite upd_same; reflexivity|].
      rewrite upd_other, (Ho2 q Hq), upd_other by exact Hq; apply Hc.
    - rewrite Hs2. destruct (Nat.eq_dec q 0) as [->|Hq].
      + rewrite upd_same, (Hs 0); reflexivity.
      + rewrite upd_other, (Hs q) by exact Hq; destruct (Nat.eqb_spec q 0); [lia | reflexivity].
  Qed.

  Lemma wtc_fill : forall k i t, 1 <= N -> 1 <= W -> i + k <= M -> fill_shape i t ->
    exists t', run N M W t (concat (repeat (fill_round N) k)) = Some t' /\ fill_shape (i + k) t'.
  Proof.
    induction k as [|k IH]; intros i t HN HW Hk Ht.
    - exists t; rewrite Nat.add_0_r; split; [reflexivity | exact Ht].
    - cbn [repeat concat]; rewrite wtc_run_app.
      destruct (wtc_fill_round i t HN HW ltac:(lia) Ht) as (t1 & Hr1 & Ht1); rewrite Hr1.
      destruct (IH (i + 1) t1 HN HW ltac:(lia) Ht1) as (t2 & Hr2 & Ht2).
      exists t2; split; [exact Hr2|]. replace (i + S k) with (i + 1 + k) by lia; exact Ht2.
  Qed.
End Fill.

(* OB-WTC-2 *)
Theorem wtc_cap_reached_for_all_n : forall N M W, 1 <= N -> 1 <= W ->
  exists s, run N M W init (cap_fill N M) = Some s /\ reachable N M W s /\
    admitted_total N s = M.
Proof.
  intros N M W HN HW.
  destruct (wtc_fill N M W M 0 init HN HW ltac:(lia)) as (s & Hrun & Hc & Hs).
  { split; intros q; cbn; [reflexivity | destruct q; reflexivity]. }
  exists s; split; [exact Hrun|]. split.
  - exact (run_reachable N M W (cap_fill N M) init s (reach_init N M W) Hrun).
  - unfold admitted_total. destruct N as [|N']; [lia|]. apply wtc_sum_first; intros q.
    unfold admitted, reservation; rewrite (Hc q), (Hs q); simpl; lia.
Qed.

(* By computation: the cap is usable (N = 2, M = 2, W = 2: server 0 reserves
   2, reads both slots, keeps: admitted total 2), and a concurrent
   reservation can make a check that would fit fail (the price, OB-WTC-3). *)
Example wtc_cap_reached :
  option_map (admitted_total 2) (run 2 2 2 init [Start 0 2; Read 0; Read 0; Decide 0]) = Some 2.
Proof. vm_compute; reflexivity. Qed.

Example wtc_spurious_rejection :
  option_map (fun s => (admitted_total 2 s, slots s 0, slots s 1))
    (run 2 1 1 init [Start 0 1; Read 0; Start 1 1; Read 0; Decide 0]) = Some (0, 0, 1).
Proof. vm_compute; reflexivity. Qed.

Print Assumptions wtc_admitted_le_cap.
Print Assumptions admitted_change.
Print Assumptions wtc_cap_reached_for_all_n.
